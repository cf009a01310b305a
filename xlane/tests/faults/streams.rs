//! A stream consumer group under the fault schedule of `kv_faults`: one
//! producer `XADD`s unique values to [`STREAM`], consumers read it through
//! group [`GROUP`] (`XREADGROUP ... BLOCK ... >`, one entry at a time) and
//! `XACK` what they got, every client following `MOVED`. After healing,
//! [`verify`] checks the stream and the group against what the clients
//! saw:
//!
//! - every acknowledged `XADD` is in the stream once, under the ID it was
//!   answered with, and the IDs of acknowledged adds rise in the order
//!   they were answered (IDs never go backwards across a leader change);
//!   nothing is in the stream that no client added;
//! - no entry was delivered twice by `>`, and each delivered what the
//!   stream holds under its ID;
//! - no entry up to the group's last delivered ID was skipped: each was
//!   seen by a consumer or is pending (delivered to one whose reply was
//!   cut off, and not acknowledged).

use super::{moved_to, Conn, OP_TIMEOUT};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;

/// The stream's key.
pub const STREAM: &str = "st";
/// The consumer group.
pub const GROUP: &str = "g";

/// What the stream's clients saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// (value, ID) of every acknowledged `XADD`, in the order answered.
    pub added: Vec<(String, String)>,
    /// Values whose `XADD` has no known outcome.
    pub unknown: BTreeSet<String>,
    /// (ID, value) of every entry a consumer got through `>`.
    pub delivered: Vec<(String, String)>,
}

/// A stream ID, ordered.
fn id(s: &str) -> Option<(u64, u64)> {
    let (ms, seq) = s.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

fn text(r: &Reply) -> Option<String> {
    match r {
        Reply::Bulk(Some(b)) => String::from_utf8(b.clone()).ok(),
        _ => None,
    }
}

/// Creates the group (and the stream) on whichever member leads.
pub fn create_group(members: &[SocketAddr]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no member created the group");
        for &a in members {
            let Some(mut c) = Conn::try_open(a, OP_TIMEOUT) else {
                continue;
            };
            match c.try_cmd(&["XGROUP", "CREATE", STREAM, GROUP, "$", "MKSTREAM"]) {
                Some(Reply::Simple(s)) if s == "OK" => return,
                Some(Reply::Error(e)) if e.starts_with("BUSYGROUP") => return,
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One client's connection, following `MOVED` and moving on from a
/// member that does not answer.
struct Follow {
    members: Vec<SocketAddr>,
    target: usize,
    conn: Option<Conn>,
}

impl Follow {
    fn new(members: Vec<SocketAddr>, first: usize) -> Follow {
        Follow {
            target: first % members.len(),
            members,
            conn: None,
        }
    }

    /// `Ok(reply)`, `Err(true)` when it surely did not run (refused by a
    /// follower: retry elsewhere), `Err(false)` when the outcome is
    /// unknown (timeout, cut connection).
    fn call(&mut self, words: &[&str]) -> Result<Reply, bool> {
        if self.conn.is_none() {
            self.conn = Conn::try_open(self.members[self.target], OP_TIMEOUT);
            if self.conn.is_none() {
                self.target = (self.target + 1) % self.members.len();
                std::thread::sleep(Duration::from_millis(20));
                return Err(true);
            }
        }
        let c = self.conn.as_mut().expect("open");
        match c.try_cmd(words) {
            Some(Reply::Error(e)) => {
                let definite = e.starts_with("MOVED ") || e.contains("was not applied");
                if let Some(l) = moved_to(&self.members, &e) {
                    self.target = l;
                    self.conn = None;
                } else if !definite {
                    self.conn = None;
                    self.target = (self.target + 1) % self.members.len();
                }
                Err(definite)
            }
            Some(r) => Ok(r),
            None => {
                self.conn = None;
                self.target = (self.target + 1) % self.members.len();
                Err(false)
            }
        }
    }
}

/// Adds `p0`, `p1`, … until `stop`.
pub fn producer(members: Vec<SocketAddr>, stop: Arc<AtomicBool>) -> Seen {
    let mut f = Follow::new(members, 0);
    let mut seen = Seen::default();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let v = format!("p{n}");
        n += 1;
        match f.call(&["XADD", STREAM, "*", "v", &v]) {
            Ok(r) => match text(&r) {
                Some(i) => seen.added.push((v, i)),
                None => panic!("XADD answered {r:?}"),
            },
            Err(true) => {}
            Err(false) => {
                seen.unknown.insert(v);
            }
        }
    }
    seen
}

/// Reads through the group as consumer `name` until `stop`, acknowledging
/// each entry it gets.
pub fn consumer(name: String, members: Vec<SocketAddr>, stop: Arc<AtomicBool>) -> Seen {
    let mut f = Follow::new(members, name.len());
    let mut seen = Seen::default();
    while !stop.load(Ordering::Relaxed) {
        let words = [
            "XREADGROUP",
            "GROUP",
            GROUP,
            &name,
            "COUNT",
            "1",
            "BLOCK",
            "200",
            "STREAMS",
            STREAM,
            ">",
        ];
        let Ok(r) = f.call(&words) else {
            continue;
        };
        // [[stream, [[id, [field, value]]]]] or nil.
        let Reply::Array(Some(streams)) = r else {
            continue;
        };
        for s in streams {
            let Reply::Array(Some(mut sv)) = s else {
                panic!("XREADGROUP answered {s:?}");
            };
            let Some(Reply::Array(Some(entries))) = sv.pop() else {
                panic!("XREADGROUP answered {sv:?}");
            };
            for e in entries {
                let Reply::Array(Some(e)) = e else {
                    panic!("an entry {e:?}");
                };
                let i = text(&e[0]).expect("an ID");
                let v = match &e[1] {
                    Reply::Array(Some(fv)) if fv.len() == 2 => text(&fv[1]).expect("a value"),
                    other => panic!("fields {other:?}"),
                };
                let _ = f.call(&["XACK", STREAM, GROUP, &i]);
                seen.delivered.push((i, v));
            }
        }
    }
    seen
}

/// Checks the stream and group held by member `a` (after healing) against
/// what the clients saw (see the module docs); returns a summary line.
pub fn verify(a: SocketAddr, seen: &Seen) -> String {
    let mut c = Conn::try_open(a, Duration::from_secs(5)).expect("a member after healing");
    // The stream: ID → value.
    let Reply::Array(Some(entries)) = c.cmd(&["XRANGE", STREAM, "-", "+"]) else {
        panic!("XRANGE");
    };
    let mut stream: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut values = BTreeSet::new();
    for e in &entries {
        let Reply::Array(Some(e)) = e else {
            panic!("entry {e:?}")
        };
        let i = text(&e[0]).and_then(|s| id(&s)).expect("an ID");
        let Reply::Array(Some(fv)) = &e[1] else {
            panic!("fields {e:?}")
        };
        let v = text(&fv[1]).expect("a value");
        assert!(values.insert(v.clone()), "{v} is in the stream twice");
        stream.insert(i, v);
    }
    // Acknowledged adds: present under their ID, IDs rising.
    let mut last = (0, 0);
    for (v, i) in &seen.added {
        let i = id(i).expect("an ID");
        assert!(i > last, "XADD of {v} answered {i:?} after {last:?}");
        last = i;
        assert_eq!(stream.get(&i), Some(v), "acknowledged {v} under {i:?}");
    }
    let acked: BTreeSet<&String> = seen.added.iter().map(|(v, _)| v).collect();
    for v in stream.values() {
        assert!(
            acked.contains(v) || seen.unknown.contains(v),
            "{v} is in the stream but no client added it"
        );
    }
    // Deliveries: once each, what the stream holds.
    let mut got = BTreeSet::new();
    for (i, v) in &seen.delivered {
        let k = id(i).expect("an ID");
        assert!(got.insert(k), "entry {i} delivered twice by '>'");
        assert_eq!(stream.get(&k), Some(v), "delivered {i}");
    }
    // The group: nothing up to its last delivered ID skipped.
    let Reply::Array(Some(groups)) = c.cmd(&["XINFO", "GROUPS", STREAM]) else {
        panic!("XINFO GROUPS");
    };
    let Some(Reply::Array(Some(g))) = groups.first() else {
        panic!("no group: {groups:?}");
    };
    let field = |name: &str| {
        g.chunks(2)
            .find(|kv| text(&kv[0]).as_deref() == Some(name))
            .map(|kv| kv[1].clone())
    };
    let last_delivered = field("last-delivered-id")
        .as_ref()
        .and_then(text)
        .and_then(|s| id(&s))
        .expect("last-delivered-id");
    let Reply::Array(Some(pel)) = c.cmd(&["XPENDING", STREAM, GROUP, "-", "+", "1000000"]) else {
        panic!("XPENDING");
    };
    let pending: BTreeSet<(u64, u64)> = pel
        .iter()
        .filter_map(|p| match p {
            Reply::Array(Some(p)) => text(&p[0]).and_then(|s| id(&s)),
            _ => None,
        })
        .collect();
    let mut cut_off = 0;
    for i in stream.keys().filter(|i| **i <= last_delivered) {
        if !got.contains(i) {
            assert!(pending.contains(i), "entry {i:?} was skipped by the group");
            cut_off += 1;
        }
    }
    format!(
        "stream: {} adds acknowledged, {} unknown, {} entries; {} delivered by '>' once each, {} delivered to a reply that was cut off (pending)",
        seen.added.len(),
        seen.unknown.len(),
        stream.len(),
        got.len(),
        cut_off
    )
}
