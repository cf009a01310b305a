//! `DEBUG`: the subcommands that Redis's own test harness and tools use,
//! where they mean something for a replicated store. Each is a member's
//! own (nothing here is replicated):
//!
//! * `SET-ACTIVE-EXPIRE 0|1`: this member's active expiry cycle off or on
//!   (on the leader: keys then go only when a command meets them);
//! * `SLEEP seconds`: the connection gets its reply after that time (the
//!   member goes on serving everyone else; it is not frozen as Redis is);
//! * `RELOAD`, `LOADAOF`: the store is written to a snapshot and read back
//!   from it, as Redis saves and reloads its RDB;
//! * `DIGEST`, `DIGEST-VALUE key...`: a digest of the data set and of
//!   values (equal values, equal digests; 40 hex digits, all zeros for an
//!   empty data set or a missing key);
//! * `OBJECT key`: Redis's one-line description (encoding as
//!   `OBJECT ENCODING` gives it);
//! * `PROTOCOL type`: a reply of each RESP3 type;
//! * `CHANGE-REPL-ID`, `QUICKLIST-PACKED-THRESHOLD`, `PAUSE-CRON`,
//!   `LISTPACK`, `QUICKLIST`, `STRINGMATCH-LEN`, `JMAP`: accepted, no
//!   effect (they tune or print what xlane kv does not have).
//!
//! `SEGFAULT`, `RESTART`, `CRASH-AND-RECOVER`, `OOM`, `PANIC`, `ERROR`,
//! `ASSERT` and the like are refused.

use crate::resp::Reply;
use crate::store::Store;
use crate::value::Value;
use std::time::Duration;

/// A `DEBUG` subcommand that needs the member (its store, its state).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DebugCmd {
    /// `SET-ACTIVE-EXPIRE 0|1`.
    ActiveExpire(bool),
    /// `SLEEP seconds`.
    Sleep(Duration),
    /// `RELOAD [NOSAVE] [NOFLUSH] [MERGE]`, `LOADAOF`: `clash` when
    /// `NOFLUSH` comes without `MERGE` (what is already there clashes with
    /// what loads, as it does in Redis).
    Reload {
        /// Refuse when the store holds a key or a library.
        clash: bool,
    },
    /// `DIGEST`.
    Digest,
    /// `DIGEST-VALUE key ...`.
    DigestValue(Vec<Vec<u8>>),
    /// `OBJECT key`.
    Object(Vec<u8>),
}

/// `DEBUG RELOAD`: the store written to a snapshot and read back (or
/// Redis's error when `clash` and something is already there).
pub fn reload(st: &mut Store, clash: bool, now: u64) -> Reply {
    if clash && (!st.is_empty(now) || st.scripts().libraries().next().is_some()) {
        return Reply::err("ERR Error trying to load the RDB dump, check server logs.");
    }
    match Store::restore(&st.snapshot()) {
        Ok(new) => {
            st.replace(new);
            Reply::ok()
        }
        Err(e) => Reply::err(format!("ERR reload failed: {e}")),
    }
}

/// Parses `DEBUG args...`: a command for the member, or the reply now.
pub fn parse(args: &[Vec<u8>]) -> Result<DebugCmd, Reply> {
    let sub = args[1].to_ascii_lowercase();
    let arg = |i: usize| {
        args.get(i)
            .ok_or_else(|| crate::cmd::args::arity_error("debug"))
    };
    Ok(match sub.as_slice() {
        b"set-active-expire" => DebugCmd::ActiveExpire(arg(2)? != b"0"),
        b"sleep" => {
            let s = std::str::from_utf8(arg(2)?)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| Reply::err("ERR value is not a valid float"))?;
            DebugCmd::Sleep(Duration::from_secs_f64(s.min(3600.0)))
        }
        b"reload" => {
            let has = |w: &str| {
                args[2..]
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(w.as_bytes()))
            };
            if let Some(bad) = args[2..].iter().find(|a| {
                !["nosave", "noflush", "merge"]
                    .iter()
                    .any(|w| a.eq_ignore_ascii_case(w.as_bytes()))
            }) {
                return Err(Reply::err(format!(
                    "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options, not '{}'",
                    String::from_utf8_lossy(bad)
                )));
            }
            DebugCmd::Reload {
                clash: has("noflush") && !has("merge"),
            }
        }
        b"loadaof" => DebugCmd::Reload { clash: false },
        b"digest" => DebugCmd::Digest,
        b"digest-value" => DebugCmd::DigestValue(args[2..].to_vec()),
        b"object" => DebugCmd::Object(arg(2)?.clone()),
        b"protocol" => return Err(protocol(arg(2)?)),
        b"change-repl-id"
        | b"quicklist-packed-threshold"
        | b"pause-cron"
        | b"listpack"
        | b"quicklist"
        | b"jmap"
        | b"replybuffer"
        | b"set-skip-checksum-validation"
        | b"set-disable-deny-scripts"
        | b"dict-resizing"
        | b"client-eviction" => return Err(Reply::ok()),
        b"stringmatch-len" => return Err(Reply::ok()),
        b"htstats-key" => {
            return Err(Reply::bulk(
                "[Dictionary HT]\nNo stats available for non-hashtable encodings\n",
            ))
        }
        b"help" => {
            return Err(Reply::Array(Some(
                [
                    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "SET-ACTIVE-EXPIRE <0|1>",
                    "SLEEP <seconds>",
                    "RELOAD",
                    "LOADAOF",
                    "DIGEST",
                    "DIGEST-VALUE <key> [<key> ...]",
                    "OBJECT <key>",
                    "PROTOCOL <type>",
                    "HELP",
                ]
                .iter()
                .map(|l| Reply::Simple((*l).into()))
                .collect(),
            )))
        }
        _ => {
            return Err(Reply::err(format!(
                "ERR DEBUG {} is not served by xlane kv (try DEBUG HELP)",
                String::from_utf8_lossy(&sub).to_uppercase()
            )))
        }
    })
}

/// `DEBUG PROTOCOL type`: one reply of each kind Redis's harness checks.
fn protocol(kind: &[u8]) -> Reply {
    match kind.to_ascii_lowercase().as_slice() {
        b"string" => Reply::bulk("Hello World"),
        b"integer" => Reply::Integer(12345),
        b"double" => Reply::Double("3.141".into()),
        b"bignum" => Reply::Bignum("1234567999999999999999999999999999999".into()),
        b"null" => Reply::nil(),
        b"array" => Reply::Array(Some((0..3).map(Reply::Integer).collect())),
        b"set" => Reply::Set((0..3).map(Reply::Integer).collect()),
        b"map" => Reply::Map(
            (0..3)
                .map(|i| (Reply::Integer(i), Reply::Bool(i == 1)))
                .collect(),
        ),
        b"attrib" => Reply::Attribute(
            vec![(
                Reply::bulk("key-popularity"),
                Reply::Array(Some(vec![Reply::bulk("key:123"), Reply::Integer(90)])),
            )],
            Box::new(Reply::bulk("Some real reply following the attribute")),
        ),
        b"push" => Reply::Push(vec![Reply::bulk("server-cpu-usage"), Reply::Integer(42)]),
        b"true" => Reply::Bool(true),
        b"false" => Reply::Bool(false),
        b"verbatim" => Reply::Verbatim("txt".into(), "This is a verbatim\nstring".into()),
        _ => Reply::err(
            "ERR Wrong protocol type name. Please use one of the following: \
             string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

/// A 160-bit digest (40 hex digits) of bytes, built from four lanes of a
/// 64-bit mixing hash: stable across builds and members (no seed), not a
/// cryptographic one.
struct Digest([u64; 3]);

impl Digest {
    fn new() -> Digest {
        Digest([
            0x9e37_79b9_7f4a_7c15,
            0xbf58_476d_1ce4_e5b9,
            0x94d0_49bb_1331_11eb,
        ])
    }

    fn feed(&mut self, b: &[u8]) {
        for (lane, seed) in self.0.iter_mut().zip([1u64, 2, 3]) {
            let mut h = *lane ^ (b.len() as u64).wrapping_mul(seed);
            for &x in b {
                h = (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3 ^ seed);
            }
            *lane = crate::value::SplitMix::new(h).next_u64();
        }
    }

    fn hex(&self) -> String {
        let mut s = format!("{:016x}{:016x}{:016x}", self.0[0], self.0[1], self.0[2]);
        s.truncate(40);
        s
    }
}

/// The digest of one value: its type and contents in order.
fn value_digest(v: &Value) -> Digest {
    let mut d = Digest::new();
    d.feed(v.type_name().as_bytes());
    match v {
        Value::Str(s) => d.feed(s),
        Value::List(l) => l.iter().for_each(|x| d.feed(x)),
        Value::Set(s) => s.iter().for_each(|x| d.feed(x)),
        Value::Hash(h) => h.iter().for_each(|(f, x)| {
            d.feed(f);
            d.feed(x)
        }),
        Value::ZSet(z) => z.scores.iter().for_each(|(m, sc)| {
            d.feed(m);
            d.feed(&sc.get().to_bits().to_le_bytes())
        }),
        // Everything a stream holds, as its uncompressed RDB object.
        Value::Stream(_) => {
            let o = crate::data::rdb::DumpOptions {
                rdbcompression: false,
                ..Default::default()
            };
            let mut b = Vec::new();
            crate::data::rdb::encode_object(v, &o, &mut b);
            d.feed(&b)
        }
    }
    d
}

const ZEROS: &str = "0000000000000000000000000000000000000000";

/// The reply of a [`DebugCmd`] that reads the store at `now`: `DIGEST`,
/// `DIGEST-VALUE`, `OBJECT` (the others are the member's to answer).
pub fn read(cmd: &DebugCmd, st: &Store, now: u64) -> Option<Reply> {
    Some(match cmd {
        DebugCmd::Digest => {
            let mut keys: Vec<&[u8]> = st.keys(now).collect();
            if keys.is_empty() {
                return Some(Reply::Simple(ZEROS.into()));
            }
            keys.sort_unstable();
            let mut d = Digest::new();
            for k in keys {
                d.feed(k);
                if let Some(v) = st.value(k, now) {
                    d.feed(value_digest(v).hex().as_bytes());
                }
                if let Some(Some(t)) = st.expiry(k, now) {
                    d.feed(&t.to_le_bytes());
                }
            }
            Reply::Simple(d.hex())
        }
        DebugCmd::DigestValue(keys) => Reply::Array(Some(
            keys.iter()
                .map(|k| {
                    Reply::Simple(
                        st.value(k, now)
                            .map_or_else(|| ZEROS.to_string(), |v| value_digest(v).hex()),
                    )
                })
                .collect(),
        )),
        DebugCmd::Object(k) => match st.value(k, now) {
            None => Reply::err("ERR no such key"),
            Some(v) => Reply::Simple(format!(
                "Value at:0x0 refcount:1 encoding:{} serializedlength:{} lru:0 lru_seconds_idle:0",
                crate::cmd::encoding_name(v),
                serialized_len(v)
            )),
        },
        _ => return None,
    })
}

/// About the bytes a value takes when dumped.
fn serialized_len(v: &Value) -> usize {
    match v {
        Value::Str(s) => s.len(),
        Value::List(l) => l.iter().map(|x| x.len() + 1).sum(),
        Value::Set(s) => s.iter().map(|x| x.len() + 1).sum(),
        Value::Hash(h) => h.iter().map(|(f, x)| f.len() + x.len() + 2).sum(),
        Value::ZSet(z) => z.scores.keys().map(|m| m.len() + 9).sum(),
        Value::Stream(_) => crate::data::rdb::dump(v).len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::execute_local;
    use crate::resp::split_inline;

    #[test]
    fn digests_follow_values_not_keys() {
        let mut st = Store::new();
        let run =
            |st: &mut Store, l: &str| execute_local(st, &split_inline(l.as_bytes()).unwrap(), 1);
        let digest = |st: &Store| read(&DebugCmd::Digest, st, 1).unwrap();
        assert_eq!(digest(&st), Reply::Simple(ZEROS.into()));
        run(&mut st, "RPUSH a x y");
        run(&mut st, "RPUSH b x y");
        run(&mut st, "RPUSH c y x");
        let dv = read(
            &DebugCmd::DigestValue(vec![
                b"a".to_vec(),
                b"b".to_vec(),
                b"c".to_vec(),
                b"n".to_vec(),
            ]),
            &st,
            1,
        )
        .unwrap();
        let Reply::Array(Some(d)) = dv else {
            panic!("{dv:?}")
        };
        assert_eq!(d[0], d[1]);
        assert_ne!(d[0], d[2]);
        assert_eq!(d[3], Reply::Simple(ZEROS.into()));
        let before = digest(&st);
        assert_ne!(before, Reply::Simple(ZEROS.into()));
        run(&mut st, "RPUSH c z");
        assert_ne!(digest(&st), before);
    }

    #[test]
    fn subcommands_parse() {
        let p = |l: &str| parse(&split_inline(l.as_bytes()).unwrap());
        assert_eq!(
            p("DEBUG SET-ACTIVE-EXPIRE 0"),
            Ok(DebugCmd::ActiveExpire(false))
        );
        assert_eq!(
            p("debug sleep 0.5"),
            Ok(DebugCmd::Sleep(Duration::from_millis(500)))
        );
        assert_eq!(p("DEBUG RELOAD"), Ok(DebugCmd::Reload { clash: false }));
        assert_eq!(
            p("DEBUG RELOAD noflush"),
            Ok(DebugCmd::Reload { clash: true })
        );
        assert_eq!(
            p("DEBUG RELOAD NOSAVE noflush MERGE"),
            Ok(DebugCmd::Reload { clash: false })
        );
        assert!(p("DEBUG RELOAD sometimes").is_err());
        assert_eq!(p("DEBUG QUICKLIST-PACKED-THRESHOLD 1b"), Err(Reply::ok()));
        assert_eq!(p("DEBUG PROTOCOL true"), Err(Reply::Bool(true)));
        assert!(matches!(p("DEBUG SEGFAULT"), Err(Reply::Error(_))));
        assert!(matches!(p("DEBUG SLEEP x"), Err(Reply::Error(_))));
    }
}
