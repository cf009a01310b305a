//! The GEO commands as xlane kv's command layer serves them (`GEOADD`,
//! `GEODIST`, `GEOHASH`, `GEOPOS`, `GEORADIUS`, `GEORADIUS_RO`,
//! `GEORADIUSBYMEMBER`, `GEORADIUSBYMEMBER_RO`, `GEOSEARCH`,
//! `GEOSEARCHSTORE`): the wiring around `xlane_kv::data::geo` (whose
//! arithmetic `data_geo.rs` checks against Redis on random points).
//!
//! * [`session_equals_redis`]: a session run on a real redis-server 7.0 and
//!   on a store (`execute_local`), in RESP2 and again after `HELLO 3`:
//!   every reply, and every keyspace event each command fires, must be
//!   Redis's (the order of the key and option checks, key creation and
//!   deletion, `STORE`'s replacement of the destination).
//! * [`searches_without_store_are_reads`]: which words make a write.
//! * [`random_writes_keep_their_promises`]: seeded random geo commands (the
//!   differential test's generator) over a store: a write the leader
//!   would answer unchanged (`unchanged_reply`) changes nothing and gets
//!   that reply; a search classified as a read changes nothing when
//!   applied as a write and replies the same.
//! * [`random_geo_commands_equal_redis`]: 20 000 seeded random commands
//!   (the differential generator's geo commands, mixed with `ZADD` of odd
//!   scores, `DEL`, `SET`, expiries) on Redis and on a store, reply for
//!   reply, in RESP2 and in RESP3 (half of them read back from RESP2
//!   bytes first, as a replicated write's reply and `EXEC`'s are).

mod support;

use support::differential;
use support::real_redis::{RealRedis, Resp, Value};
use xlane_kv::exec::execute_local;
use xlane_kv::exec::Apply;
use xlane_kv::notify::NotifyFlags;
use xlane_kv::resp::Reply;
use xlane_kv::value::Value as Held;
use xlane_kv::{classify, Action, ReadCmd, Store, WriteCmd, WriteOp};

const T0: u64 = 1_700_000_000_000;

/// The session: (inline command). Keys: `Sicily` and `odd` sorted sets,
/// `str` a string, `dst` a store target, `nokey` absent.
const SESSION: &[&str] = &[
    "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    // Nothing changes: no event, reply 0.
    "GEOADD Sicily 13.361389 38.115556 Palermo",
    "GEOADD Sicily CH 13.361389 38.115556 Palermo 13.583333 37.316667 Agrigento",
    "GEOADD Sicily CH 13.4 38.1 Palermo",
    "GEOADD Sicily 13.361389 38.115556 Palermo",
    "GEOADD Sicily NX 1 1 Palermo",
    "GEOADD Sicily NX CH 1 1 Palermo 14.2 38.2 Other",
    "GEOADD Sicily XX 1 1 nosuch",
    "GEOADD Sicily XX CH 14.25 38.25 Other 1 1 nosuch",
    "GEOADD nokey XX 1 1 a",
    "EXISTS nokey",
    "GEOADD Sicily NX XX 1 1 a",
    "GEOADD Sicily 1 2 3 4",
    "GEOADD Sicily NX CH",
    "GEOADD Sicily 1 200 a",
    "GEOADD Sicily x 2 a",
    "GEOADD Sicily 13.5 38 dup 13.6 38.1 dup",
    "ZSCORE Sicily dup",
    "SET str hello",
    "GEOADD str 1 1 a",
    // The points are checked before the key's type.
    "GEOADD str 1 100 a",
    "GEOADD str NX XX 1 1 a",
    "GEODIST Sicily Palermo Catania",
    "GEODIST Sicily Palermo Catania km",
    "GEODIST Sicily Palermo Catania MI",
    "GEODIST Sicily Palermo nosuch",
    "GEODIST nokey a b",
    "GEODIST str a b",
    // The unit is checked before the key.
    "GEODIST str a b parsecs",
    "GEODIST Sicily a b km extra",
    "GEOHASH Sicily Palermo Catania nosuch",
    "GEOHASH nokey a",
    "GEOHASH str a",
    "GEOPOS Sicily Palermo nosuch Catania",
    "GEOPOS nokey a b",
    "GEOPOS str a",
    "GEORADIUS Sicily 15 37 200 km",
    "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH ASC",
    "GEORADIUS Sicily 15 37 200 km DESC COUNT 2",
    "GEORADIUS Sicily 15 37 200 km COUNT 1 ANY",
    "GEORADIUS Sicily 15 37 200 km ANY",
    "GEORADIUS Sicily 15 37 200 km COUNT 0",
    "GEORADIUS Sicily 15 37 -1 km",
    "GEORADIUS Sicily 15 37 200 parsecs",
    "GEORADIUS Sicily 15 91 200 km",
    "GEORADIUS Sicily 15 37 200 km NOPE",
    // WRONGTYPE comes before any option error.
    "GEORADIUS str 15 37 200 parsecs",
    "GEORADIUS nokey 15 37 200 km",
    "GEORADIUS nokey 15 37 200 km WITHDIST",
    "GEORADIUS nokey 15 37 200 km STORE dst",
    "SET dst x",
    // A missing source deletes the destination.
    "GEORADIUS nokey 15 37 200 km STORE dst",
    "EXISTS dst",
    "GEORADIUS Sicily 15 37 200 km STORE dst",
    "TYPE dst",
    "ZRANGE dst 0 -1 WITHSCORES",
    "EXPIRE dst 1000",
    // STORE replaces the destination, its expiry included.
    "GEORADIUS Sicily 15 37 200 km STOREDIST dst COUNT 2 DESC",
    "PERSIST dst",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STORE str",
    "TYPE str",
    "SET str hello",
    // Nothing found: the destination goes.
    "GEORADIUS Sicily 15 37 1 m STORE dst",
    "EXISTS dst",
    "GEORADIUS Sicily 15 37 1 m STORE dst",
    "GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST",
    "GEORADIUS Sicily 15 37 200 km STORE",
    "GEORADIUS_RO Sicily 15 37 200 km WITHDIST",
    "GEORADIUS_RO Sicily 15 37 200 km STORE dst",
    "GEORADIUS_RO str 15 37 200 km",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km WITHCOORD COUNT 2",
    "GEORADIUSBYMEMBER Sicily nosuch 200 km",
    "GEORADIUSBYMEMBER Sicily nosuch x km",
    "GEORADIUSBYMEMBER Sicily Palermo x km",
    "GEORADIUSBYMEMBER nokey nosuch x km",
    "GEORADIUSBYMEMBER str Palermo 200 km",
    "GEORADIUSBYMEMBER_RO Sicily Palermo 100 km DESC",
    "GEORADIUSBYMEMBER_RO Sicily Palermo 100 km STOREDIST dst",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km STOREDIST dst ASC",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC WITHCOORD WITHDIST WITHHASH",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC COUNT 2",
    "GEOSEARCH Sicily BYBOX 400 400 km FROMMEMBER Palermo",
    "GEOSEARCH Sicily FROMMEMBER nosuch BYRADIUS 10 km",
    "GEOSEARCH Sicily BYRADIUS 200 km",
    "geoSearch Sicily BYRADIUS 200 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37",
    "GEOSEARCH Sicily FROMLONLAT 15 37 FROMMEMBER Palermo BYRADIUS 1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km BYBOX 1 1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 -1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE dst",
    "GEOSEARCH nokey FROMMEMBER nosuch BYRADIUS 10 km",
    "GEOSEARCH str FROMMEMBER nosuch BYRADIUS 10 km",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST COUNT 1",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST",
    "GEOSEARCHSTORE dst str FROMLONLAT 15 37 BYRADIUS 200 km",
    "GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYRADIUS 200 km",
    "EXISTS dst",
    "GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYRADIUS 200 km",
    // The source is the destination.
    "GEOSEARCHSTORE Sicily Sicily FROMMEMBER Palermo BYRADIUS 100 km",
    "ZRANGE Sicily 0 -1 WITHSCORES",
    // Any sorted set is a geo set: its scores decode to points.
    "ZADD odd 2.5 a inf b -1 c 0 d 4503599627370496 e",
    "GEOPOS odd a b c d e",
    "GEOHASH odd a b c d e",
    "GEODIST odd a e",
    "GEOSEARCH odd FROMLONLAT 0 0 BYBOX 40000 40000 km WITHHASH WITHCOORD",
    "GEORADIUS odd -180 -85 100 km WITHHASH",
    // GEOADD keeps the key's expiry.
    "EXPIRE Sicily 1000",
    "GEOADD Sicily 13 38 kept",
    "PERSIST Sicily",
];

/// A reply of ours as a RESP2 connection reads it.
fn to_value(r: &Reply) -> Value {
    match r {
        Reply::Simple(s) => Value::Simple(s.clone()),
        Reply::Error(s) => Value::Error(s.clone()),
        Reply::Integer(i) => Value::Int(*i),
        Reply::Bool(b) => Value::Int(i64::from(*b)),
        Reply::Bulk(b) => Value::Bulk(b.clone()),
        Reply::Array(None) => Value::Array(None),
        Reply::Array(Some(items)) | Reply::Set(items) | Reply::Push(items) => {
            Value::Array(Some(items.iter().map(to_value).collect()))
        }
        Reply::Map(pairs) => Value::Array(Some(
            pairs
                .iter()
                .flat_map(|(k, v)| [to_value(k), to_value(v)])
                .collect(),
        )),
        Reply::Double(s) | Reply::Bignum(s) | Reply::Verbatim(_, s) => {
            Value::Bulk(Some(s.clone().into_bytes()))
        }
        Reply::Attribute(_, r) => to_value(r),
    }
}

/// A reply of ours as a RESP3 connection reads it.
fn to_value3(r: &Reply) -> Value {
    match r {
        Reply::Bulk(None) | Reply::Array(None) => Value::Bulk(None),
        Reply::Array(Some(items)) | Reply::Set(items) => {
            Value::Array(Some(items.iter().map(to_value3).collect()))
        }
        Reply::Map(pairs) => Value::Array(Some(
            pairs
                .iter()
                .flat_map(|(k, v)| [to_value3(k), to_value3(v)])
                .collect(),
        )),
        Reply::Double(s) => Value::Double(s.clone()),
        other => to_value(other),
    }
}

fn words(line: &str) -> Vec<Vec<u8>> {
    line.split_whitespace()
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

/// Runs `line` on Redis and returns its reply and the keyspace events it
/// fired, as (event, key): `sub` is subscribed to every keyevent channel
/// and to `geo-sync`, which the main connection publishes to after the
/// command (the events come before that message).
fn redis_run(
    main: &mut Resp,
    sub: &mut Resp,
    line: &str,
    n: usize,
) -> (Value, Vec<(String, String)>) {
    let reply = main.line(line);
    let sync = n.to_string();
    main.line(&format!("PUBLISH geo-sync {sync}"));
    let mut events = Vec::new();
    loop {
        let Value::Array(Some(m)) = sub.read() else {
            panic!("unexpected pub/sub frame");
        };
        let text = |v: &Value| String::from_utf8_lossy(v.bytes().unwrap_or_default()).into_owned();
        match m.len() {
            3 if text(&m[2]) == sync => break,
            4 => {
                let channel = text(&m[2]);
                let event = channel.trim_start_matches("__keyevent@0__:").to_string();
                events.push((event, text(&m[3])));
            }
            _ => {}
        }
    }
    (reply, events)
}

#[test]
fn session_equals_redis() {
    let redis = RealRedis::start();
    let mut main = redis.conn();
    let mut sub = redis.conn();
    assert_eq!(
        main.line("CONFIG SET notify-keyspace-events EA"),
        Value::Simple("OK".into())
    );
    sub.line("PSUBSCRIBE __keyevent@0__:*");
    sub.line("SUBSCRIBE geo-sync");
    let mut n = 0;
    for resp3 in [false, true] {
        if resp3 {
            main.line("HELLO 3");
        }
        let mut st = Store::new();
        st.set_notifications(NotifyFlags::ALL);
        n += 1;
        redis_run(&mut main, &mut sub, "FLUSHALL", n);
        for (i, line) in SESSION.iter().enumerate() {
            n += 1;
            let (want, want_events) = redis_run(&mut main, &mut sub, line, n);
            let args = words(line);
            let reply = execute_local(&mut st, &args, T0 + i as u64);
            let got = if resp3 {
                to_value3(&xlane_kv::resp3::shape(&args, &[], reply))
            } else {
                to_value(&reply)
            };
            let events: Vec<(String, String)> = st
                .drain_events()
                .map(|e| {
                    (
                        e.event.to_string(),
                        String::from_utf8_lossy(&e.key).into_owned(),
                    )
                })
                .collect();
            let proto = if resp3 { "RESP3" } else { "RESP2" };
            assert_eq!(got, want, "{proto} step {i}: {line}: reply");
            assert_eq!(events, want_events, "{proto} step {i}: {line}: events");
        }
    }
}

#[test]
fn searches_without_store_are_reads() {
    let check = |line: &str| {
        xlane_kv::cmd::check(&words(line))
            .expect("runs here")
            .map(|(write, _)| write)
    };
    for (line, write) in [
        ("GEOADD k 1 1 a", true),
        ("GEORADIUS k 1 1 10 km", false),
        ("GEORADIUS k 1 1 10 km WITHDIST COUNT 3", false),
        ("GEORADIUS k 1 1 10 km STORE d", true),
        ("GEORADIUS k 1 1 10 km store d ASC", true),
        ("GEORADIUS k 1 1 10 km STOREDIST d", true),
        // Refused whatever the key: no change either way.
        ("GEORADIUS k 1 1 10 km STORE d WITHDIST", false),
        ("GEORADIUS k 1 1 10 km STORE", false),
        ("GEORADIUSBYMEMBER k m 10 km", false),
        ("GEORADIUSBYMEMBER k m 10 km STORE d", true),
        // The radius is checked against an existing key only.
        ("GEORADIUSBYMEMBER k m x km STOREDIST d", true),
        ("GEORADIUS_RO k 1 1 10 km", false),
        ("GEORADIUSBYMEMBER_RO k m 10 km", false),
        ("GEOSEARCH k FROMLONLAT 1 1 BYRADIUS 1 km", false),
        ("GEOSEARCHSTORE d k FROMLONLAT 1 1 BYRADIUS 1 km", true),
        ("GEOPOS k a", false),
        ("GEOHASH k a", false),
        ("GEODIST k a b", false),
    ] {
        assert_eq!(check(line), Ok(write), "{line}");
    }
    // Errors found before the key is looked up: a write's before it is
    // proposed, a read's where it runs (on an empty store, so no key).
    assert!(check("GEOADD k 1 100 a").is_err());
    assert_eq!(check("GEODIST k a b parsecs"), Ok(false));
    let reply = execute_local(&mut Store::new(), &words("GEODIST k a b parsecs"), T0);
    assert!(
        matches!(&reply, Reply::Error(e) if e.contains("unsupported unit")),
        "{reply:?}"
    );
    // A search without STORE queued in MULTI runs as a query.
    assert!(matches!(
        classify(words("GEORADIUS k 1 1 10 km"), T0),
        Action::Read(ReadCmd::Data { .. })
    ));
}

/// Every key with its value, version and expiry.
/// A key as the test sees it: name, value, version, expiry.
type Seen = (Vec<u8>, Held, u64, Option<Option<u64>>);

fn view(st: &Store, now: u64) -> Vec<Seen> {
    let mut keys: Vec<Vec<u8>> = st.keys(now).map(<[u8]>::to_vec).collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let v = st.value(&k, now).cloned().unwrap_or(Held::Str(Vec::new()));
            let ver = st.version(&k, now);
            let exp = st.expiry(&k, now);
            (k, v, ver, exp)
        })
        .collect()
}

#[test]
fn random_writes_keep_their_promises() {
    let mut rng = differential::Rng::new(0x6e0);
    let mut st = Store::new();
    st.set_notifications(NotifyFlags::ALL);
    let (mut quiet, mut read_searches) = (0, 0);
    for i in 0..20_000u64 {
        let now = T0 + i;
        // Mostly geo commands, with the stream's others (ZADD, DEL, SET
        // ...) mixed in so keys change type and sorted sets get any score.
        let cmd = if rng.below(4) == 0 {
            differential::command(&mut rng)
        } else {
            differential::geo(&mut rng)
        };
        let args: Vec<Vec<u8>> = cmd.iter().map(|w| w.as_bytes().to_vec()).collect();
        let name = cmd[0].to_ascii_lowercase();
        match classify(args.clone(), now) {
            Action::Write(op) => {
                let unchanged = st.unchanged_reply(&op);
                let before = view(&st, now);
                let reply = st.apply(&op);
                let events = st.drain_events().count();
                if let Some(u) = unchanged {
                    quiet += 1;
                    assert_eq!(reply, u, "{cmd:?}: the unchanged reply");
                    assert_eq!(view(&st, now), before, "{cmd:?}: answered unchanged");
                    assert_eq!(events, 0, "{cmd:?}: answered unchanged, fired events");
                }
            }
            Action::Read(ReadCmd::Data { args, seed, known }) => {
                let reply = xlane_kv::cmd::read(&st, known, &args, seed, now);
                if name == "georadius" || name == "georadiusbymember" {
                    // Applied as a write it would change nothing.
                    read_searches += 1;
                    let mut copy = st.frozen();
                    copy.set_notifications(NotifyFlags::ALL);
                    let before = view(&copy, now);
                    let op = WriteOp::new(now, WriteCmd::Data { args, seed });
                    assert_eq!(copy.apply(&op), reply, "{cmd:?}: read and applied");
                    assert_eq!(
                        view(&copy, now),
                        before,
                        "{cmd:?}: a read changed the store"
                    );
                    assert_eq!(
                        copy.drain_events().count(),
                        0,
                        "{cmd:?}: a read fired events"
                    );
                }
            }
            _ => {}
        }
    }
    assert!(quiet > 500, "only {quiet} writes answered unchanged");
    assert!(
        read_searches > 500,
        "only {read_searches} searches as reads"
    );
}

/// A command mixed into the geo stream: sorted sets with any score (odd
/// ones decode to odd points), removals, a key of another type, an
/// expiry that a store must drop, and reads of the whole set.
fn mixed(r: &mut differential::Rng) -> Vec<String> {
    let key = format!("{}{}", r.pick(&["z", "z", "z", "z", "s"]), r.below(3));
    let member = r
        .pick(&["a", "b", "c", "d", "e", "1", "10", "2"])
        .to_string();
    let score = r
        .pick(&[
            "0",
            "1",
            "2.5",
            "-1",
            "inf",
            "-inf",
            "3471579339700058",
            "3479099956230698",
            "4503599627370495",
            "4503599627370496",
            "9007199254740992",
            "1e300",
        ])
        .to_string();
    let v: Vec<&str> = match r.below(10) {
        0..=3 => vec!["ZADD", &key, &score, &member],
        4 => vec!["ZREM", &key, &member],
        5 => vec!["DEL", &key],
        // Mostly onto the string keys: a sorted set turned string stays
        // one until deleted or stored over.
        6 if key.starts_with('s') || r.below(4) == 0 => vec!["SET", &key, "x"],
        7 => vec![r.pick(&["EXPIRE", "PERSIST"]), &key, "1000"],
        _ => vec!["ZRANGE", &key, "0", "-1", "WITHSCORES"],
    };
    let n = if v[0] == "PERSIST" { 2 } else { v.len() };
    v[..n].iter().map(|w| w.to_string()).collect()
}

/// The reply as a client of the protocol reads it back.
fn wire(r: &Reply, resp3: bool) -> Reply {
    let bytes = if resp3 {
        let mut out = Vec::new();
        r.encode_resp3(&mut out);
        out
    } else {
        r.to_bytes()
    };
    match xlane_kv::resp::decode_reply(&bytes) {
        Ok(Some((back, _))) => back,
        other => panic!("our reply does not decode: {other:?}"),
    }
}

#[test]
fn random_geo_commands_equal_redis() {
    let redis = RealRedis::start();
    let addr = format!("127.0.0.1:{}", redis.port).parse().expect("addr");
    let mut conn = differential::Conn::new(addr);
    let mut bad = Vec::new();
    let mut compared = 0;
    // What the stream exercised: searches (and GEOPOS/GEOHASH) that found
    // two or more, stored searches that stored something, errors.
    let (mut found, mut stored, mut errors) = (0, 0, 0);
    for (pass, resp3) in [(0u64, false), (1, true)] {
        let mut rng = differential::Rng::new(0x6e0_5eed + pass);
        let mut st = Store::new();
        let hello = if resp3 { "3" } else { "2" };
        conn.run(&[vec!["HELLO".into(), hello.into()], vec!["FLUSHALL".into()]]);
        let cmds: Vec<Vec<String>> = (0..20_000)
            .map(|_| match rng.below(4) {
                0 => mixed(&mut rng),
                _ => differential::geo(&mut rng),
            })
            .collect();
        for batch in cmds.chunks(500) {
            let want = conn.run(batch);
            for (cmd, want) in batch.iter().zip(want) {
                let args: Vec<Vec<u8>> = cmd.iter().map(|w| w.as_bytes().to_vec()).collect();
                let reply = execute_local(&mut st, &args, T0);
                // A write's reply (and EXEC's) comes back from the log as
                // RESP2 bytes before it is shaped: every other command
                // takes that path here, whatever it is.
                compared += 1;
                let reply = match (resp3, compared % 2 == 0) {
                    (true, true) => xlane_kv::resp3::shape(&args, &[], wire(&reply, false)),
                    (true, false) => xlane_kv::resp3::shape(&args, &[], reply),
                    (false, _) => reply,
                };
                let got = wire(&reply, resp3);
                let name = cmd[0].to_ascii_lowercase();
                match &got {
                    Reply::Array(Some(items)) if items.len() >= 2 && name.starts_with("geo") => {
                        found += 1
                    }
                    Reply::Integer(n) if *n > 0 && name.starts_with("geo") && name != "geoadd" => {
                        stored += 1
                    }
                    Reply::Error(_) => errors += 1,
                    _ => {}
                }
                if got != want && bad.len() < 20 {
                    bad.push(format!(
                        "{}: {}\n  redis: {want:?}\n  ours:  {got:?}",
                        if resp3 { "RESP3" } else { "RESP2" },
                        cmd.join(" ")
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {compared} differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
    println!("{compared} compared: {found} found 2+, {stored} stored, {errors} errors");
    assert!(found > 3000 && stored > 1000 && errors > 5000);
}
