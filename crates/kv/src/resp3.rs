//! RESP3 (`HELLO 3`): the shape each command's reply takes for a
//! connection that speaks it.
//!
//! Every command builds its reply once, in RESP2's terms, and that is what
//! the state machine returns and the store answers; a RESP3 connection
//! reshapes it here by the command that asked, as Redis 7.0 does:
//!
//! * maps: `HGETALL`, `CONFIG GET`;
//! * sets: `SMEMBERS`, `SINTER`, `SUNION`, `SDIFF`, `SPOP` with a count;
//! * doubles: `ZSCORE`, `ZINCRBY`, `ZADD ... INCR`, `ZMSCORE`'s items, and
//!   every score in a `WITHSCORES` reply;
//! * pairs: a `WITHSCORES`/`WITHVALUES` reply, and `ZPOPMIN`/`ZPOPMAX`
//!   with a count, become an array of two-element arrays (RESP2 has them
//!   flat); `ZMPOP`'s pairs (nested in RESP2 too) get double scores;
//! * `LCS ... IDX`: a map (`matches`, `len`);
//! * `XREAD`/`XREADGROUP`: a map key → entries; `XINFO`'s maps (built as
//!   maps; reshaped where they arrive flat, inside `EXEC`);
//! * geo coordinates (`GEOPOS`, a search's `WITHCOORD`): doubles (built
//!   as doubles, they come back as bulk strings from a replicated op such
//!   as `EXEC`);
//! * `EXEC`: each queued command's reply reshaped by that command;
//! * nil (either kind) is RESP3's null, written by
//!   [`Reply::encode_resp3`].
//!
//! RESP2 connections see nothing of this: their replies are the ones
//! built, byte for byte.

use crate::resp::{Command, Reply};

/// Whether any argument after the first `skip` is `word` (any case).
/// The `numkeys` at `args[1]` (0 when it is not a count).
fn numkeys(args: &Command) -> usize {
    args.get(1)
        .and_then(|n| std::str::from_utf8(n).ok()?.parse::<usize>().ok())
        .unwrap_or(0)
}

fn has(args: &Command, skip: usize, word: &str) -> bool {
    args.iter()
        .skip(skip)
        .any(|a| a.eq_ignore_ascii_case(word.as_bytes()))
}

/// A RESP2 score (a bulk string) as a RESP3 double; nil and errors stay.
fn double(r: Reply) -> Reply {
    match r {
        Reply::Bulk(Some(b)) => Reply::Double(String::from_utf8_lossy(&b).into_owned()),
        other => other,
    }
}

/// A flat `[a, b, a, b, ...]` as `[[a, b], [a, b], ...]`, `b` mapped by
/// `second`.
fn pairs(r: Reply, second: fn(Reply) -> Reply) -> Reply {
    match r {
        Reply::Array(Some(items)) => {
            let mut out = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(a), Some(b)) = (it.next(), it.next()) {
                out.push(Reply::Array(Some(vec![a, second(b)])));
            }
            Reply::Array(Some(out))
        }
        other => other,
    }
}

fn map(r: Reply) -> Reply {
    match r {
        Reply::Array(Some(items)) => {
            let mut out = Vec::with_capacity(items.len() / 2);
            let mut it = items.into_iter();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            Reply::Map(out)
        }
        other => other,
    }
}

fn set(r: Reply) -> Reply {
    match r {
        Reply::Array(Some(items)) => Reply::Set(items),
        other => other,
    }
}

fn same(r: Reply) -> Reply {
    r
}

/// `ZMPOP`'s `[key, [[member, score], ...]]`: the scores as doubles.
fn key_and_pairs(r: Reply) -> Reply {
    match r {
        Reply::Array(Some(mut kv)) if kv.len() == 2 => {
            if let Some(Reply::Array(Some(items))) = kv.pop() {
                let items = items
                    .into_iter()
                    .map(|p| match p {
                        Reply::Array(Some(mut p)) if p.len() == 2 => {
                            let s = p.pop().map(double);
                            p.extend(s);
                            Reply::Array(Some(p))
                        }
                        other => other,
                    })
                    .collect();
                kv.push(Reply::Array(Some(items)));
            }
            Reply::Array(Some(kv))
        }
        other => other,
    }
}

/// `XREAD`/`XREADGROUP`'s `[[key, entries], ...]` as a map key →
/// entries (Redis 7.0's RESP3 shape); the nil array stays.
fn key_map(r: Reply) -> Reply {
    match r {
        Reply::Array(Some(items)) => Reply::Map(
            items
                .into_iter()
                .filter_map(|kv| match kv {
                    Reply::Array(Some(mut kv)) if kv.len() == 2 => {
                        let v = kv.pop()?;
                        let k = kv.pop()?;
                        Some((k, v))
                    }
                    _ => None,
                })
                .collect(),
        ),
        other => other,
    }
}

/// `XINFO`'s maps, where they arrive flat (a reply that went through a
/// replicated op, such as `EXEC`'s): `STREAM` one map, `GROUPS` and
/// `CONSUMERS` an array of maps. (`STREAM ... FULL` nests maps in maps;
/// built as maps, it keeps them when read directly.)
fn xinfo(args: &Command, r: Reply) -> Reply {
    let sub = args
        .get(1)
        .map(|s| s.to_ascii_lowercase())
        .unwrap_or_default();
    match sub.as_slice() {
        b"stream" if args.len() == 3 => map(r),
        b"groups" | b"consumers" => match r {
            Reply::Array(Some(items)) => Reply::Array(Some(items.into_iter().map(map).collect())),
            other => other,
        },
        _ => r,
    }
}

/// A `[longitude, latitude]` pair (`GEOPOS`, `WITHCOORD`) as doubles.
fn coords(r: Reply) -> Reply {
    match r {
        Reply::Array(Some(p)) if p.len() == 2 => {
            Reply::Array(Some(p.into_iter().map(double).collect()))
        }
        other => other,
    }
}

/// A geo search's items: with `WITHCOORD`, an item is an array whose last
/// element is the coordinate pair (no other element is an array).
fn geo_items(r: Reply) -> Reply {
    match r {
        Reply::Array(Some(items)) => Reply::Array(Some(
            items
                .into_iter()
                .map(|item| match item {
                    Reply::Array(Some(mut parts)) => {
                        if let Some(last) = parts.pop() {
                            parts.push(coords(last));
                        }
                        Reply::Array(Some(parts))
                    }
                    other => other,
                })
                .collect(),
        )),
        other => other,
    }
}

/// `reply`, built for `args` in RESP2's terms, in the shape RESP3 gives
/// it. `queued`: for `EXEC`, the commands it ran, in order.
pub fn shape(args: &Command, queued: &[Command], reply: Reply) -> Reply {
    if reply.is_error() {
        return reply;
    }
    let Some(name) = args.first() else {
        return reply;
    };
    let name = name.to_ascii_lowercase();
    match name.as_slice() {
        b"hgetall" => map(reply),
        b"config" if args.get(1).is_some_and(|s| s.eq_ignore_ascii_case(b"get")) => map(reply),
        b"smembers" | b"sinter" | b"sunion" | b"sdiff" => set(reply),
        b"spop" if args.len() > 2 => set(reply),
        b"zscore" | b"zincrby" => double(reply),
        b"zadd" if has(args, 2, "incr") => double(reply),
        b"zmscore" => match reply {
            Reply::Array(Some(items)) => {
                Reply::Array(Some(items.into_iter().map(double).collect()))
            }
            other => other,
        },
        // Their options follow `numkeys` keys (a key may be named
        // `WITHSCORES`).
        b"zunion" | b"zinter" | b"zdiff" if has(args, 2 + numkeys(args), "withscores") => {
            pairs(reply, double)
        }
        b"zrange" | b"zrangebyscore" | b"zrevrange" | b"zrevrangebyscore" | b"zrandmember"
            if has(args, 2, "withscores") =>
        {
            pairs(reply, double)
        }
        b"hrandfield" if has(args, 2, "withvalues") => pairs(reply, same),
        b"zpopmin" | b"zpopmax" if args.len() > 2 => pairs(reply, double),
        b"zpopmin" | b"zpopmax" | b"bzpopmin" | b"bzpopmax" => match reply {
            Reply::Array(Some(mut items)) if items.len() == 2 || items.len() == 3 => {
                let score = items.pop().map(double);
                items.extend(score);
                Reply::Array(Some(items))
            }
            other => other,
        },
        b"zmpop" | b"bzmpop" => key_and_pairs(reply),
        b"geopos" => match reply {
            Reply::Array(Some(items)) => {
                Reply::Array(Some(items.into_iter().map(coords).collect()))
            }
            other => other,
        },
        b"georadius"
        | b"georadius_ro"
        | b"georadiusbymember"
        | b"georadiusbymember_ro"
        | b"geosearch" => geo_items(reply),
        // An array from `LCS` is `IDX`'s `matches` and `len`, flat in RESP2.
        b"lcs" => map(reply),
        b"xread" | b"xreadgroup" => key_map(reply),
        b"xinfo" => xinfo(args, reply),
        b"exec" => match reply {
            Reply::Array(Some(items)) if items.len() == queued.len() => Reply::Array(Some(
                items
                    .into_iter()
                    .zip(queued)
                    .map(|(r, c)| shape(c, &[], r))
                    .collect(),
            )),
            other => other,
        },
        _ => reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Command {
        s.split_whitespace()
            .map(|w| w.as_bytes().to_vec())
            .collect()
    }

    fn bulks(v: &[&str]) -> Reply {
        Reply::Array(Some(v.iter().map(|s| Reply::bulk(*s)).collect()))
    }

    fn pair(a: &str, b: Reply) -> Reply {
        Reply::Array(Some(vec![Reply::bulk(a), b]))
    }

    fn d(s: &str) -> Reply {
        Reply::Double(s.into())
    }

    #[test]
    fn replies_take_redis_resp3_shapes() {
        let table: Vec<(&str, Reply, Reply)> = vec![
            (
                "HGETALL h",
                bulks(&["a", "1", "b", "2"]),
                Reply::Map(vec![
                    (Reply::bulk("a"), Reply::bulk("1")),
                    (Reply::bulk("b"), Reply::bulk("2")),
                ]),
            ),
            (
                "SMEMBERS s",
                bulks(&["x"]),
                Reply::Set(vec![Reply::bulk("x")]),
            ),
            ("SPOP s", Reply::bulk("x"), Reply::bulk("x")),
            (
                "SPOP s 2",
                bulks(&["x"]),
                Reply::Set(vec![Reply::bulk("x")]),
            ),
            ("ZSCORE z m", Reply::bulk("1.5"), d("1.5")),
            ("ZSCORE z nope", Reply::nil(), Reply::nil()),
            ("ZADD z INCR 1 m", Reply::bulk("2"), d("2")),
            ("ZADD z 1 m", Reply::Integer(1), Reply::Integer(1)),
            (
                "ZMSCORE z a b",
                Reply::Array(Some(vec![Reply::bulk("1"), Reply::nil()])),
                Reply::Array(Some(vec![d("1"), Reply::nil()])),
            ),
            (
                "ZRANGE z 0 -1 WITHSCORES",
                bulks(&["a", "1", "b", "inf"]),
                Reply::Array(Some(vec![pair("a", d("1")), pair("b", d("inf"))])),
            ),
            ("ZRANGE z 0 -1", bulks(&["a"]), bulks(&["a"])),
            (
                "ZPOPMIN z",
                bulks(&["a", "1"]),
                Reply::Array(Some(vec![Reply::bulk("a"), d("1")])),
            ),
            (
                "ZPOPMAX z 1",
                bulks(&["a", "1"]),
                Reply::Array(Some(vec![pair("a", d("1"))])),
            ),
            (
                "HRANDFIELD h 1 WITHVALUES",
                bulks(&["a", "1"]),
                Reply::Array(Some(vec![pair("a", Reply::bulk("1"))])),
            ),
            (
                "CONFIG GET save",
                bulks(&["save", ""]),
                Reply::Map(vec![(Reply::bulk("save"), Reply::bulk(""))]),
            ),
            (
                "ZMPOP 1 z MIN COUNT 2",
                Reply::Array(Some(vec![
                    Reply::bulk("z"),
                    Reply::Array(Some(vec![
                        pair("a", Reply::bulk("1")),
                        pair("b", Reply::bulk("2.5")),
                    ])),
                ])),
                Reply::Array(Some(vec![
                    Reply::bulk("z"),
                    Reply::Array(Some(vec![pair("a", d("1")), pair("b", d("2.5"))])),
                ])),
            ),
            ("ZMPOP 1 z MIN", Reply::Array(None), Reply::Array(None)),
            (
                "XREAD STREAMS s 0",
                Reply::Array(Some(vec![pair("s", Reply::Array(Some(vec![])))])),
                Reply::Map(vec![(Reply::bulk("s"), Reply::Array(Some(vec![])))]),
            ),
            (
                "XREAD BLOCK 0 STREAMS s $",
                Reply::Array(None),
                Reply::Array(None),
            ),
            (
                "XINFO STREAM s",
                bulks(&["length", "1"]),
                Reply::Map(vec![(Reply::bulk("length"), Reply::bulk("1"))]),
            ),
            (
                "XINFO GROUPS s",
                Reply::Array(Some(vec![bulks(&["name", "g"])])),
                Reply::Array(Some(vec![Reply::Map(vec![(
                    Reply::bulk("name"),
                    Reply::bulk("g"),
                )])])),
            ),
            (
                "ZRANDMEMBER z -2 WITHSCORES",
                bulks(&["a", "1", "a", "1"]),
                Reply::Array(Some(vec![pair("a", d("1")), pair("a", d("1"))])),
            ),
            (
                "ZUNION 2 a b WITHSCORES",
                bulks(&["m", "2"]),
                Reply::Array(Some(vec![pair("m", d("2"))])),
            ),
            (
                "LCS a b IDX",
                Reply::Array(Some(vec![
                    Reply::bulk("matches"),
                    Reply::Array(Some(vec![])),
                    Reply::bulk("len"),
                    Reply::Integer(0),
                ])),
                Reply::Map(vec![
                    (Reply::bulk("matches"), Reply::Array(Some(vec![]))),
                    (Reply::bulk("len"), Reply::Integer(0)),
                ]),
            ),
            ("LCS a b", Reply::bulk("ab"), Reply::bulk("ab")),
            ("LCS a b LEN", Reply::Integer(2), Reply::Integer(2)),
            ("GET k", Reply::bulk("v"), Reply::bulk("v")),
            (
                "ZSCORE k m",
                Reply::err("WRONGTYPE x"),
                Reply::err("WRONGTYPE x"),
            ),
        ];
        for (c, resp2, want) in table {
            assert_eq!(shape(&cmd(c), &[], resp2), want, "{c}");
        }
    }

    #[test]
    fn geo_coordinates_are_doubles() {
        let pos = |a: Reply, b: Reply| Reply::Array(Some(vec![a, b]));
        // As a replicated op (EXEC) gives them: bulk strings.
        let got = shape(
            &cmd("GEOPOS k a nosuch"),
            &[],
            Reply::Array(Some(vec![
                pos(Reply::bulk("13.5"), Reply::bulk("38")),
                Reply::Array(None),
            ])),
        );
        assert_eq!(
            got,
            Reply::Array(Some(vec![pos(d("13.5"), d("38")), Reply::Array(None)]))
        );
        // Built as doubles: unchanged.
        let built = Reply::Array(Some(vec![pos(d("1"), d("2"))]));
        assert_eq!(shape(&cmd("GEOPOS k a"), &[], built.clone()), built);
        // WITHDIST WITHHASH WITHCOORD: only the pair changes.
        let item = |c: Reply| {
            Reply::Array(Some(vec![
                Reply::bulk("m"),
                Reply::bulk("1.5000"),
                Reply::Integer(7),
                c,
            ]))
        };
        let got = shape(
            &cmd("GEOSEARCH k FROMLONLAT 1 2 BYRADIUS 9 km WITHDIST WITHHASH WITHCOORD"),
            &[],
            Reply::Array(Some(vec![item(pos(Reply::bulk("1"), Reply::bulk("2")))])),
        );
        assert_eq!(got, Reply::Array(Some(vec![item(pos(d("1"), d("2")))])));
        // Members alone, or WITHDIST alone: nothing to change.
        let plain = bulks(&["a", "b"]);
        assert_eq!(
            shape(&cmd("GEORADIUS k 1 2 9 km"), &[], plain.clone()),
            plain
        );
        let dist = Reply::Array(Some(vec![Reply::Array(Some(vec![
            Reply::bulk("a"),
            Reply::bulk("0.5000"),
        ]))]));
        assert_eq!(
            shape(
                &cmd("GEORADIUSBYMEMBER k a 9 km WITHDIST"),
                &[],
                dist.clone()
            ),
            dist
        );
    }

    #[test]
    fn exec_reshapes_each_queued_reply() {
        let queued = [cmd("ZINCRBY z 1 m"), cmd("HGETALL h"), cmd("INCR n")];
        let got = shape(
            &cmd("EXEC"),
            &queued,
            Reply::Array(Some(vec![
                Reply::bulk("3"),
                bulks(&["a", "1"]),
                Reply::Integer(4),
            ])),
        );
        assert_eq!(
            got,
            Reply::Array(Some(vec![
                d("3"),
                Reply::Map(vec![(Reply::bulk("a"), Reply::bulk("1"))]),
                Reply::Integer(4),
            ]))
        );
        // An aborted EXEC (nil) stays nil.
        assert_eq!(
            shape(&cmd("EXEC"), &queued, Reply::Array(None)),
            Reply::Array(None)
        );
    }

    #[test]
    fn resp3_wire_forms_round_trip() {
        let r = Reply::Array(Some(vec![
            Reply::Map(vec![(Reply::bulk("a"), d("1.5"))]),
            Reply::Set(vec![Reply::Integer(1)]),
            Reply::nil(),
        ]));
        let mut out = Vec::new();
        r.encode_resp3(&mut out);
        assert_eq!(
            out,
            b"*3\r\n%1\r\n$1\r\na\r\n,1.5\r\n~1\r\n:1\r\n_\r\n".to_vec()
        );
        let (back, n) = crate::resp::decode_reply(&out).unwrap().unwrap();
        assert_eq!(n, out.len());
        assert_eq!(back, r);
        // RESP2 flattens.
        assert_eq!(
            r.to_bytes(),
            b"*3\r\n*2\r\n$1\r\na\r\n$3\r\n1.5\r\n*1\r\n:1\r\n$-1\r\n".to_vec()
        );
    }
}
