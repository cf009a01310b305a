use super::*;
use proptest::prelude::*;

fn parse_all(p: &mut Parser) -> (Vec<Command>, Option<RespError>) {
    let mut cmds = Vec::new();
    loop {
        match p.next_command() {
            Ok(Some(c)) => cmds.push(c),
            Ok(None) => return (cmds, None),
            Err(e) => return (cmds, Some(e)),
        }
    }
}

fn parse_bytes(limits: Limits, data: &[u8]) -> (Vec<Command>, Option<RespError>) {
    let mut p = Parser::new(limits);
    p.feed(data);
    parse_all(&mut p)
}

fn v(words: &[&str]) -> Command {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

#[test]
fn headers_are_written_as_to_string_would() {
    for (kind, n) in [
        (b'*', 0i64),
        (b'$', 9),
        (b'$', 10),
        (b':', -1),
        (b':', 1234567890123),
        (b':', i64::MAX),
        (b':', i64::MIN),
    ] {
        let mut out = b"x".to_vec();
        write_header(kind, n, &mut out);
        assert_eq!(out, format!("x{}{n}\r\n", kind as char).into_bytes());
    }
}

#[test]
fn table() {
    let small = Limits {
        max_bulk: 10,
        max_array: 3,
        max_inline: 16,
        max_command: 15,
    };
    type Case = (&'static [u8], Vec<Command>, Option<RespError>);
    let cases: Vec<(Limits, Case)> = vec![
        (
            Limits::default(),
            (b"*1\r\n$4\r\nPING\r\n", vec![v(&["PING"])], None),
        ),
        (
            Limits::default(),
            (
                b"*2\r\n$3\r\nGET\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n",
                vec![v(&["GET", ""]), v(&["PING"])],
                None,
            ),
        ),
        (
            Limits::default(),
            (b"*0\r\n*-1\r\nPING\r\n", vec![v(&["PING"])], None),
        ),
        (Limits::default(), (b"PING\n", vec![v(&["PING"])], None)),
        (
            Limits::default(),
            (
                b"  set  a \"b c\\x41\\n\" 'd\\'e'\r\n",
                vec![v(&["set", "a", "b cA\n", "d'e"])],
                None,
            ),
        ),
        (Limits::default(), (b"\r\n\n", vec![], None)),
        (
            Limits::default(),
            (b"set \"a\"b\r\n", vec![], Some(RespError::UnbalancedQuotes)),
        ),
        (
            Limits::default(),
            (b"set \"ab\r\n", vec![], Some(RespError::UnbalancedQuotes)),
        ),
        (
            Limits::default(),
            (b"*x\r\n", vec![], Some(RespError::InvalidMultibulkLength)),
        ),
        (
            Limits::default(),
            (b"*+1\r\n", vec![], Some(RespError::InvalidMultibulkLength)),
        ),
        (
            Limits::default(),
            (b"*1\n", vec![], Some(RespError::InvalidMultibulkLength)),
        ),
        (
            Limits::default(),
            (b"*1\r\n:1\r\n", vec![], Some(RespError::ExpectedBulk(b':'))),
        ),
        (
            Limits::default(),
            (b"*1\r\n$-1\r\n", vec![], Some(RespError::InvalidBulkLength)),
        ),
        (
            Limits::default(),
            (
                b"*1\r\n$01\r\na\r\n",
                vec![],
                Some(RespError::InvalidBulkLength),
            ),
        ),
        (
            Limits::default(),
            (
                b"*1\r\n$2147483648\r\n",
                vec![],
                Some(RespError::InvalidBulkLength),
            ),
        ),
        (
            Limits::default(),
            (b"*1\r\n$1\r\nab\r\n", vec![], Some(RespError::MissingCrlf)),
        ),
        (
            Limits::default(),
            (b"*1\r\n$1\r\na\rx", vec![], Some(RespError::MissingCrlf)),
        ),
        (
            small,
            (b"*4\r\n", vec![], Some(RespError::InvalidMultibulkLength)),
        ),
        (
            small,
            (b"*1\r\n$11\r\n", vec![], Some(RespError::InvalidBulkLength)),
        ),
        (
            small,
            (
                b"*2\r\n$8\r\naaaaaaaa\r\n$8\r\n",
                vec![],
                Some(RespError::CommandTooLarge(15)),
            ),
        ),
        (small, (b"0123456789abcdefg", vec![], None)),
        (
            small,
            (b"0123456789abcdefgh", vec![], Some(RespError::LineTooLong)),
        ),
        (
            small,
            (
                b"0123456789abcdef\r\n",
                vec![v(&["0123456789abcdef"])],
                None,
            ),
        ),
        (
            small,
            (
                b"0123456789abcdefg\r\n",
                vec![],
                Some(RespError::LineTooLong),
            ),
        ),
        // Incomplete input is not an error.
        (
            Limits::default(),
            (b"*2\r\n$3\r\nGET\r\n$1\r", vec![], None),
        ),
    ];
    for (i, (limits, (input, want, want_err))) in cases.into_iter().enumerate() {
        let got = parse_bytes(limits, input);
        assert_eq!(
            got,
            (want.clone(), want_err.clone()),
            "case {i}: {:?}",
            String::from_utf8_lossy(input)
        );
        // Byte by byte gives the same.
        let mut p = Parser::new(limits);
        let mut cmds = Vec::new();
        let mut err = None;
        for b in input {
            p.feed(&[*b]);
            let (c, e) = parse_all(&mut p);
            cmds.extend(c);
            if e.is_some() {
                err = e;
                break;
            }
        }
        assert_eq!((cmds, err), (want, want_err), "case {i} byte by byte");
    }
}

#[test]
fn errors_are_sticky() {
    let mut p = Parser::default();
    p.feed(b"*x\r\n*1\r\n$4\r\nPING\r\n");
    assert!(p.next_command().is_err());
    assert!(p.next_command().is_err());
}

#[test]
fn strict_integers() {
    let table: &[(&[u8], Option<i64>)] = &[
        (b"0", Some(0)),
        (b"-0", None),
        (b"01", None),
        (b"+1", None),
        (b" 1", None),
        (b"1 ", None),
        (b"", None),
        (b"-", None),
        (b"9223372036854775807", Some(i64::MAX)),
        (b"9223372036854775808", None),
        (b"-9223372036854775808", Some(i64::MIN)),
        (b"-9223372036854775809", None),
        (b"123", Some(123)),
        (b"-45", Some(-45)),
        (b"1.5", None),
    ];
    for (s, want) in table {
        assert_eq!(
            parse_i64_strict(s),
            *want,
            "{:?}",
            String::from_utf8_lossy(s)
        );
    }
}

#[test]
fn reply_encoding() {
    let table = [
        (Reply::ok(), &b"+OK\r\n"[..]),
        (Reply::err("ERR x\r\ny"), b"-ERR x  y\r\n"),
        (Reply::Integer(-3), b":-3\r\n"),
        (Reply::nil(), b"$-1\r\n"),
        (Reply::bulk("ab"), b"$2\r\nab\r\n"),
        (Reply::Array(None), b"*-1\r\n"),
        (
            Reply::Array(Some(vec![Reply::Integer(1), Reply::nil()])),
            b"*2\r\n:1\r\n$-1\r\n",
        ),
    ];
    for (r, want) in table {
        assert_eq!(r.to_bytes(), want);
    }
}

fn arb_reply() -> impl Strategy<Value = Reply> {
    let leaf = prop_oneof![
        "[a-zA-Z0-9 ]{0,20}".prop_map(Reply::Simple),
        "[A-Z]{1,5} [a-z ]{0,20}".prop_map(Reply::Error),
        any::<i64>().prop_map(Reply::Integer),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)).prop_map(Reply::Bulk),
    ];
    leaf.prop_recursive(3, 30, 5, |inner| {
        proptest::option::of(proptest::collection::vec(inner, 0..5)).prop_map(Reply::Array)
    })
}

proptest! {
    #[test]
    fn commands_round_trip(
        cmds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..50), 1..6), 0..8),
        cut in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let mut wire = Vec::new();
        for c in &cmds {
            encode_command(c, &mut wire);
        }
        let (got, err) = parse_bytes(Limits::default(), &wire);
        prop_assert_eq!(err, None);
        prop_assert_eq!(&got, &cmds);
        // Split at arbitrary points.
        let mut cuts: Vec<usize> = cut.iter().map(|c| c % (wire.len() + 1)).collect();
        cuts.sort_unstable();
        let mut p = Parser::default();
        let mut last = 0;
        let mut got2 = Vec::new();
        for c in cuts.into_iter().chain(std::iter::once(wire.len())) {
            p.feed(&wire[last..c]);
            last = c;
            let (cs, e) = parse_all(&mut p);
            prop_assert_eq!(e, None);
            got2.extend(cs);
        }
        prop_assert_eq!(got2, cmds);
        prop_assert!(p.is_idle());
    }

    #[test]
    fn reply_decoder_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = decode_reply(&data);
        let _ = decode_reply(b"\r\n");
        let _ = decode_reply(b"\n");
    }

    #[test]
    fn replies_round_trip(r in arb_reply()) {
        let b = r.to_bytes();
        let (d, n) = decode_reply(&b).unwrap().unwrap();
        prop_assert_eq!(n, b.len());
        prop_assert_eq!(d, r);
        for cut in 0..b.len() {
            prop_assert_eq!(decode_reply(&b[..cut]).unwrap(), None);
        }
    }

    /// Whole requests are read in one pass (`Parser::whole`), split ones
    /// by the state machine: both agree on every request and every
    /// error, however a request is damaged or sized against the limits.
    #[test]
    fn one_pass_and_split_reads_agree_on_damaged_requests(
        cmds in proptest::collection::vec(
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..14), 1..5), 1..4),
        at in any::<usize>(),
        byte in prop_oneof![
            Just(b'\r'), Just(b'\n'), Just(b'$'), Just(b'*'), Just(b'-'), Just(b'0'),
            Just(b'9'), any::<u8>()
        ],
        damage in any::<bool>(),
    ) {
        let limits = Limits { max_bulk: 12, max_array: 3, max_inline: 30, max_command: 30 };
        let mut wire = Vec::new();
        for c in &cmds {
            encode_command(c, &mut wire);
        }
        if damage {
            let i = at % wire.len();
            wire[i] = byte;
        }
        let whole = parse_bytes(limits, &wire);
        let mut p = Parser::new(limits);
        let mut split = (Vec::new(), None);
        for b in &wire {
            p.feed(std::slice::from_ref(b));
            let (cs, e) = parse_all(&mut p);
            split.0.extend(cs);
            if e.is_some() {
                split.1 = e;
                break;
            }
        }
        prop_assert_eq!(whole, split);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_split_agrees(
        data in proptest::collection::vec(any::<u8>(), 0..200),
        cut in any::<usize>(),
    ) {
        let limits = Limits { max_bulk: 40, max_array: 8, max_inline: 30, max_command: 100 };
        let whole = parse_bytes(limits, &data);
        let c = cut % (data.len() + 1);
        let mut p = Parser::new(limits);
        p.feed(&data[..c]);
        let (mut cmds, mut err) = parse_all(&mut p);
        if err.is_none() {
            p.feed(&data[c..]);
            let (c2, e2) = parse_all(&mut p);
            cmds.extend(c2);
            err = e2;
        }
        prop_assert_eq!(whole, (cmds, err));
    }
}
