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
//!   flat);
//! * `EXEC`: each queued command's reply reshaped by that command;
//! * nil (either kind) is RESP3's null, written by
//!   [`Reply::encode_resp3`].
//!
//! RESP2 connections see nothing of this: their replies are the ones
//! built, byte for byte.

use crate::resp::{Command, Reply};

/// Whether any argument after the first `skip` is `word` (any case).
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
        b"zrange" | b"zrangebyscore" | b"zrevrange" | b"zrevrangebyscore" | b"zrandmember"
        | b"zunion" | b"zinter" | b"zdiff"
            if has(args, 2, "withscores") =>
        {
            pairs(reply, double)
        }
        b"hrandfield" if has(args, 2, "withvalues") => pairs(reply, same),
        b"zpopmin" | b"zpopmax" if args.len() > 2 => pairs(reply, double),
        b"zpopmin" | b"zpopmax" => match reply {
            Reply::Array(Some(mut items)) if items.len() == 2 => {
                let score = items.pop().map(double);
                items.extend(score);
                Reply::Array(Some(items))
            }
            other => other,
        },
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
