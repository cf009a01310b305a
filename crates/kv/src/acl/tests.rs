//! Table-driven tests of the ACL module. The expected texts are Redis
//! 7.0.15's (observed on a real server); `tests/acl_rules.rs` compares
//! random sequences with one.

use super::*;
use crate::value::SplitMix;

fn words(s: &str) -> Vec<Vec<u8>> {
    s.split(' ')
        .filter(|w| !w.is_empty())
        .map(|w| w.as_bytes().to_vec())
        .collect()
}

fn setuser(t: &mut UserTable, name: &str, rules: &str) -> Result<SetUserOutcome, AclError> {
    t.apply_setuser(name.as_bytes(), &words(rules))
}

fn line(t: &UserTable, name: &str) -> String {
    String::from_utf8(t.user(name.as_bytes()).expect("user").list_line()).expect("utf8")
}

#[test]
fn setuser_sessions_describe_as_redis() {
    // (rules applied in turn to a fresh user `t`, its ACL LIST line).
    let cases: &[(&[&str], &str)] = &[
        (&[""], "user t off resetchannels -@all"),
        (&["reset"], "user t off sanitize-payload resetchannels -@all"),
        (&["on"], "user t on resetchannels -@all"),
        (&["ON nopass"], "user t on nopass resetchannels -@all"),
        (&["%R"], "user t off %R~ resetchannels -@all"),
        (&["%RW~*"], "user t off ~* resetchannels -@all"),
        (&["%wr~x"], "user t off ~x resetchannels -@all"),
        (&["Allkeys"], "user t off ~* resetchannels -@all"),
        (&["%R~* ~foo"], "user t off %R~* ~foo resetchannels -@all"),
        (&["~a %R~a"], "user t off ~a resetchannels -@all"),
        (&["%W~a %R~a"], "user t off ~a resetchannels -@all"),
        (&[">a >a"], "user t off #ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb resetchannels -@all"),
        (&["nopass >x"], "user t off #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 resetchannels -@all"),
        (&["+select|0 +select|0 +SELECT|0"], "user t off resetchannels -@all +select|0"),
        (&["+get|x"], "user t off resetchannels -@all +get|x"),
        (&["+get|x +get"], "user t off resetchannels -@all +get"),
        (&["+get|x +@read"], "user t off resetchannels -@all +@read"),
        (&["( ~x )"], "user t off resetchannels -@all (~x resetchannels -@all)"),
        (&["(+PING (+SELECT (+DEL )"], "user t off resetchannels -@all (resetchannels -@all +del)"),
        (&["(~x )"], "user t off resetchannels -@all (~x resetchannels -@all)"),
        (&["()"], "user t off resetchannels -@all (resetchannels -@all)"),
        (&["( )"], "user t off resetchannels -@all (resetchannels -@all)"),
        (&["(~x) (~y)"], "user t off resetchannels -@all (~x resetchannels -@all) (~y resetchannels -@all)"),
        (&["(~x ~y)"], "user t off resetchannels -@all (~x ~y resetchannels -@all)"),
        (&["(~x' )"], "user t off resetchannels -@all (resetchannels -@all)"),
        (&["(~x)", "clearselectors"], "user t off resetchannels -@all"),
        (&["(+@all ~*)"], "user t off resetchannels -@all (~* resetchannels +@all)"),
        (&["(%R~a %W~a %R~b)"], "user t off resetchannels -@all (~a %R~b resetchannels -@all)"),
        (&["(&x &y &x)"], "user t off resetchannels -@all (resetchannels &x &y -@all)"),
        (&["(allchannels)"], "user t off resetchannels -@all (&* -@all)"),
        (&["+@all -get"], "user t off resetchannels +@all -get"),
        (&["+@all -get +get"], "user t off resetchannels +@all"),
        (&["+@all -@all"], "user t off resetchannels -@all"),
        (&["+@all -select +select|0"], "user t off resetchannels +@all -select +select|0"),
        (&["-@all +@hash"], "user t off resetchannels -@all +@hash"),
        (&["+config|get"], "user t off resetchannels -@all +config|get"),
        (&["+config -config|set"], "user t off resetchannels -@all +config -config|set"),
        (&["&a &b", "resetchannels &c"], "user t off resetchannels &c -@all"),
        (&["allchannels"], "user t off &* -@all"),
        (&["on >p ~k* &c +@string", "reset"], "user t off sanitize-payload resetchannels -@all"),
        (&["skip-sanitize-payload"], "user t off skip-sanitize-payload resetchannels -@all"),
        (&["skip-sanitize-payload sanitize-payload"], "user t off sanitize-payload resetchannels -@all"),
        // Redis' order of the single commands is its hash table's; sorted
        // here on both sides.
        (&["+@read +@write -@keyspace"], "user t off resetchannels -@all +@sortedset +@string +@hash +@geo +@bitmap +@hyperloglog +@list +@stream +@set +function|delete +function|restore +function|flush +function|load -xinfo|help +lolwut -pfselftest -xgroup|help +memory|usage"),
    ];
    for (steps, want) in cases {
        let mut t = UserTable::new();
        for s in *steps {
            setuser(&mut t, "t", s).unwrap_or_else(|e| panic!("{steps:?}: {e}"));
        }
        assert_eq!(
            sorted_singles(&line(&t, "t")),
            sorted_singles(want),
            "{steps:?}"
        );
    }
}

/// The line with its single-command rules (`+get`, `-config|set`: the
/// tail of the rules) sorted.
fn sorted_singles(line: &str) -> String {
    let mut head: Vec<&str> = Vec::new();
    let mut singles: Vec<&str> = Vec::new();
    for t in line.split(' ') {
        let single = (t.starts_with('+') || t.starts_with('-')) && !t[1..].starts_with('@');
        if single {
            singles.push(t);
        } else {
            head.push(t);
        }
    }
    singles.sort_unstable();
    head.extend(singles);
    head.join(" ")
}

#[test]
fn setuser_errors_as_redis() {
    let m = |rule: &str, why: &str| format!("ERR Error in ACL SETUSER modifier '{rule}': {why}");
    let unknown = "Unknown command or category name in ACL";
    let syntax = "Syntax error";
    let cases: Vec<(&str, String)> = vec![
        ("-", m("-", unknown)),
        ("+", m("+", unknown)),
        ("%", m("%", syntax)),
        ("%~foo", m("%~foo", syntax)),
        ("%RR~x", m("%RR~x", syntax)),
        ("allkeys ~foo", m("~foo", RuleError::KeyAfterAll.message())),
        ("allkeys %", m("%", RuleError::KeyAfterAll.message())),
        ("&* &x", m("&x", RuleError::ChannelAfterAll.message())),
        ("+get|", m("+get|", syntax)),
        (
            "+config|get|x",
            m("+config|get|x", RuleError::FirstArgOfSubcommand.message()),
        ),
        ("+config|", m("+config|", syntax)),
        ("+config|nosuch", m("+config|nosuch", unknown)),
        ("-get|x", m("-get|x", unknown)),
        ("+|", m("+|", unknown)),
        ("+@", m("+@", unknown)),
        ("-@nosuch", m("-@nosuch", unknown)),
        ("+@all|x", m("+@all|x", unknown)),
        ("#abc", m("#abc", RuleError::BadHash.message())),
        ("!abc", m("!abc", RuleError::BadHash.message())),
        ("<nope", m("<nope", RuleError::NoSuchPassword.message())),
        ("~a b", m("b", syntax)),
        ("(on)", m("(on)", syntax)),
        ("(>pass)", m("(>pass)", syntax)),
        ("(reset)", m("(reset)", syntax)),
        ("(~x clearselectors )", m("(~x clearselectors )", syntax)),
        (
            "(allkeys ~x)",
            m("(allkeys ~x)", RuleError::KeyAfterAll.message()),
        ),
        (")", m(")", syntax)),
        (
            "(",
            "ERR Unmatched parenthesis in acl selector starting at '('.".into(),
        ),
        (
            "(~x",
            "ERR Unmatched parenthesis in acl selector starting at '(~x'.".into(),
        ),
        (
            "on (~a (~b",
            "ERR Unmatched parenthesis in acl selector starting at '(~b'.".into(),
        ),
    ];
    for (rules, want) in cases {
        let mut t = UserTable::new();
        setuser(&mut t, "t", "reset").expect("reset");
        let before = t.clone();
        let e = setuser(&mut t, "t", rules).expect_err(rules);
        assert_eq!(e.reply(), Reply::err(want), "{rules}");
        assert_eq!(t, before, "{rules}: nothing applied");
    }
    // A quoted word with a space inside a selector.
    let mut t = UserTable::new();
    let e = t
        .apply_setuser(b"t", &[&b"(\"~x y\")"[..]])
        .expect_err("space");
    assert_eq!(
        e.to_string(),
        "Error in ACL SETUSER modifier '(\"~x y\")': Syntax error"
    );
    // Usernames, DELUSER default.
    assert_eq!(t.apply_setuser(b"a b", &["on"]), Err(AclError::BadUsername));
    assert_eq!(
        t.apply_setuser(b"a\0b", &["on"]),
        Err(AclError::BadUsername)
    );
    assert_eq!(
        t.apply_deluser(&["x", "default"]),
        Err(AclError::DeleteDefault)
    );
    assert_eq!(
        AclError::BadUsername.reply(),
        Reply::err("ERR Usernames can't contain spaces or null characters")
    );
}

#[test]
fn default_user_requirepass_and_pubsub_default() {
    let mut t = UserTable::new();
    assert_eq!(line(&t, "default"), "user default on nopass ~* &* +@all");
    t.set_requirepass(b"a");
    assert_eq!(
        line(&t, "default"),
        "user default on #ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb ~* &* +@all"
    );
    assert!(t.authenticate(b"default", b"a").is_ok());
    assert_eq!(t.authenticate(b"default", b"b"), Err(AuthError));
    t.set_requirepass(b"");
    assert_eq!(line(&t, "default"), "user default on nopass ~* &* +@all");
    t.set_pubsub_default(true);
    setuser(&mut t, "n", "").expect("new");
    assert_eq!(line(&t, "n"), "user n off &* -@all");
    setuser(&mut t, "n", "resetchannels &a (~x)").expect("sel");
    assert_eq!(
        line(&t, "n"),
        "user n off resetchannels &a -@all (~x &* -@all)"
    );
    setuser(&mut t, "n", "reset").expect("reset");
    assert_eq!(line(&t, "n"), "user n off sanitize-payload &* -@all");
}

#[test]
fn auth_as_redis() {
    let mut t = UserTable::new();
    setuser(&mut t, "u", "on >pw >other").expect("u");
    setuser(&mut t, "off", ">pw").expect("off");
    setuser(&mut t, "free", "on nopass").expect("free");
    let cases: &[(&str, Result<(), AuthError>)] = &[
        ("u pw", Ok(())),
        ("u other", Ok(())),
        ("u PW", Err(AuthError)),
        ("off pw", Err(AuthError)),
        ("free anything", Ok(())),
        ("nobody pw", Err(AuthError)),
    ];
    for (w, want) in cases {
        let (u, p) = w.split_once(' ').expect("pair");
        assert_eq!(t.authenticate(u.as_bytes(), p.as_bytes()), *want, "{w}");
    }
    let auth = |t: &UserTable, s: &str| t.auth_command(&words(s));
    assert_eq!(
        auth(&t, "AUTH pw"),
        AuthOutcome::Error(Reply::err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"))
    );
    assert_eq!(
        auth(&t, "AUTH a b c"),
        AuthOutcome::Error(Reply::err("ERR syntax error"))
    );
    assert_eq!(
        auth(&t, "AUTH u pw"),
        AuthOutcome::Ok {
            user: b"u".to_vec()
        }
    );
    assert_eq!(
        auth(&t, "AUTH u x"),
        AuthOutcome::Failed {
            user: b"u".to_vec()
        }
    );
    t.set_requirepass(b"pw");
    assert_eq!(
        auth(&t, "AUTH pw"),
        AuthOutcome::Ok {
            user: b"default".to_vec()
        }
    );
    assert_eq!(
        AuthError.reply(),
        Reply::err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    // Removing a password.
    setuser(&mut t, "u", "<pw").expect("remove");
    assert_eq!(t.authenticate(b"u", b"pw"), Err(AuthError));
    assert!(t.authenticate(b"u", b"other").is_ok());
}

#[test]
fn checks_as_redis() {
    // (rules, command words, None for allowed or the DRYRUN text).
    let cases: &[(&str, &str, Option<&str>)] = &[
        ("+@all ~*", "get a", None),
        (
            "-@all",
            "get a",
            Some("This user has no permissions to run the 'get' command"),
        ),
        (
            "+get",
            "get a",
            Some("This user has no permissions to access the 'a' key"),
        ),
        ("+get ~a*", "get ab", None),
        (
            "+get %W~a*",
            "get ab",
            Some("This user has no permissions to access the 'ab' key"),
        ),
        ("+get %R~a*", "get ab", None),
        ("+set %W~a*", "set ab v", None),
        (
            "+set %W~a*",
            "set ab v GET",
            Some("This user has no permissions to access the 'ab' key"),
        ),
        ("+set %RW~a*", "set ab v get", None),
        (
            "+lmove %R~s* %W~d*",
            "lmove s1 d1 LEFT RIGHT",
            Some("This user has no permissions to access the 's1' key"),
        ),
        ("+lmove ~s* %W~d*", "lmove s1 d1 LEFT RIGHT", None),
        (
            "+mset ~a",
            "mset a 1 b 2",
            Some("This user has no permissions to access the 'b' key"),
        ),
        ("+zunionstore %R~s* %W~d", "zunionstore d 2 s1 s2", None),
        (
            "+zunionstore %R~s*",
            "zunionstore d 2 s1 s2",
            Some("This user has no permissions to access the 'd' key"),
        ),
        // numkeys that string2ll refuses: Redis' own finder, no flags.
        ("+zunionstore %R~s* %R~d", "zunionstore d 2x s1 s2", None),
        ("+zunionstore", "zunionstore d 0 s1", None),
        ("+sort %R~k %W~d", "sort k STORE d", None),
        (
            "+sort %R~k",
            "sort k LIMIT 0 1 STORE d",
            Some("This user has no permissions to access the 'd' key"),
        ),
        (
            "+xread ~a",
            "xread STREAMS a b 0 0",
            Some("This user has no permissions to access the 'b' key"),
        ),
        ("+xread ~a", "xread STREAMS a 0", None),
        ("+migrate ~a", "migrate h 1 a 0 10", None),
        (
            "+migrate ~a",
            "migrate h 1  0 10 KEYS a b",
            Some("This user has no permissions to access the 'b' key"),
        ),
        ("+bitfield %R~a", "bitfield a GET u8 0", None),
        (
            "+bitfield %R~a",
            "bitfield a SET u8 0 1",
            Some("This user has no permissions to access the 'a' key"),
        ),
        (
            "+georadius %R~a",
            "georadius a 0 0 1 km STORE d",
            Some("This user has no permissions to access the 'd' key"),
        ),
        ("+eval", "eval s 0", None),
        (
            "+eval ~a",
            "eval s 2 a b",
            Some("This user has no permissions to access the 'b' key"),
        ),
        (
            "+publish",
            "publish ch m",
            Some("This user has no permissions to access the 'ch' channel"),
        ),
        ("+publish &c*", "publish ch m", None),
        (
            "+spublish &x",
            "spublish ch m",
            Some("This user has no permissions to access the 'ch' channel"),
        ),
        ("+psubscribe &c*", "psubscribe c*", None),
        (
            "+psubscribe &c*",
            "psubscribe ch",
            Some("This user has no permissions to access the 'ch' channel"),
        ),
        (
            "+subscribe &c*",
            "subscribe ch cx y",
            Some("This user has no permissions to access the 'y' channel"),
        ),
        ("+unsubscribe", "unsubscribe y", None),
        ("+select|0", "select 0", None),
        (
            "+select|0",
            "select 1",
            Some("This user has no permissions to run the 'select' command"),
        ),
        ("+config|get", "config get x", None),
        (
            "+config|get",
            "config set x y",
            Some("This user has no permissions to run the 'config|set' command"),
        ),
        (
            "+config -config|set",
            "config set x y",
            Some("This user has no permissions to run the 'config|set' command"),
        ),
        ("-@all", "auth a b", None),
        (
            "+object|encoding",
            "object encoding k",
            Some("This user has no permissions to access the 'k' key"),
        ),
        ("+get (+set ~a)", "set a v", None),
        (
            "+get (+set ~a)",
            "set b v",
            Some("This user has no permissions to access the 'b' key"),
        ),
        (
            "+get (~b) (+get)",
            "get a",
            Some("This user has no permissions to access the 'a' key"),
        ),
        (
            "+publish (+publish ~x)",
            "publish c m",
            Some("This user has no permissions to access the 'c' channel"),
        ),
        (
            "~* +@all -@dangerous",
            "keys *",
            Some("This user has no permissions to run the 'keys' command"),
        ),
    ];
    for (rules, cmd, want) in cases {
        let mut t = UserTable::new();
        setuser(&mut t, "u", &format!("reset on {rules}"))
            .unwrap_or_else(|e| panic!("{rules}: {e}"));
        let args: Vec<Vec<u8>> = cmd.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        let reply = t.dryrun_reply(b"u", &args);
        let expect = match want {
            None => Reply::ok(),
            Some(s) => Reply::bulk(*s),
        };
        assert_eq!(reply, expect, "{rules} / {cmd}");
        let user = t.user(b"u").expect("u");
        let spec = resolve(&args).expect("spec");
        let res = user.check_command(spec, &args);
        assert_eq!(res.is_ok(), want.is_none(), "{rules} / {cmd}");
        if let Err(d) = res {
            let kind = match d.reason {
                DenyReason::Command => format!(
                    "NOPERM this user has no permissions to run the '{}' command",
                    spec.name
                ),
                DenyReason::Key => "NOPERM this user has no permissions to access one of the keys used as arguments".into(),
                DenyReason::Channel => "NOPERM this user has no permissions to access one of the channels used as arguments".into(),
            };
            assert_eq!(d.reply(), Reply::err(kind));
        }
    }
}

#[test]
fn key_refs_follow_the_key_specs() {
    // (words, (position, read, write)...).
    type Case<'a> = (&'a str, &'a [(usize, bool, bool)]);
    let cases: &[Case] = &[
        ("get a", &[(1, true, false)]),
        ("set a v", &[(1, false, true)]),
        ("set a v GET", &[(1, true, true)]),
        ("set a v get\0x", &[(1, true, true)]),
        (
            "del a b c",
            &[(1, false, true), (2, false, true), (3, false, true)],
        ),
        ("mset a 1 b", &[(1, false, true), (3, false, true)]),
        ("lmove s d l r", &[(1, true, true), (2, false, true)]),
        (
            "zunionstore d 2 a b",
            &[(1, false, true), (3, true, false), (4, true, false)],
        ),
        (
            "zunionstore d 2x a b",
            &[(3, false, false), (4, false, false), (1, false, false)],
        ),
        ("zunionstore d 9 a b", &[]),
        (
            "xread COUNT 1 STREAMS a b 0 0",
            &[(4, true, false), (5, true, false)],
        ),
        ("xread STREAMS", &[]),
        (
            "sort k GET x STORE d",
            &[(1, true, false), (5, false, true)],
        ),
        (
            "sort k STORE d STORE e",
            &[(1, true, false), (5, false, true)],
        ),
        ("sort_ro k BY x", &[(1, true, false)]),
        ("migrate h p k 0 1", &[(3, true, true)]),
        (
            "migrate h p  0 1 COPY KEYS a b",
            &[(8, true, true), (9, true, true)],
        ),
        ("migrate h p x 0 1 KEYS a b", &[]),
        ("bitfield k GET u8 0 OVERFLOW SAT", &[(1, true, false)]),
        ("bitfield k INCRBY u8 0 1", &[(1, true, true)]),
        (
            "georadius k 0 0 1 km STORE d",
            &[(1, true, false), (7, false, true)],
        ),
        ("eval s 2 a b x", &[(3, true, true), (4, true, true)]),
        ("eval s 0", &[]),
        ("spublish ch m", &[]),
        ("object encoding k", &[(2, false, false)]),
        ("ping", &[]),
        (
            "bitop and d a b",
            &[(2, false, true), (3, true, false), (4, true, false)],
        ),
    ];
    for (cmd, want) in cases {
        let args: Vec<Vec<u8>> = cmd.split(' ').map(|w| w.as_bytes().to_vec()).collect();
        let spec = resolve(&args).expect("spec");
        let got: Vec<(usize, bool, bool)> = key_refs(spec, &args)
            .into_iter()
            .map(|k| (k.pos, k.read, k.write))
            .collect();
        assert_eq!(got, *want, "{cmd}");
    }
    // Where the table's positions and the key specs agree.
    for c in table::TABLE {
        if c.keys.0 <= 0
            || c.has("movablekeys")
            || ["spublish", "ssubscribe", "sunsubscribe"].contains(&c.name)
        {
            continue;
        }
        // One argument more than the least for a variadic command (`PFMERGE
        // dest` alone names no key for Redis' specs).
        let n = if c.arity < 0 { 1 - c.arity } else { c.arity } as usize;
        let args: Vec<Vec<u8>> = std::iter::once(c.name.as_bytes().to_vec())
            .chain((1..n).map(|i| format!("w{i}").into_bytes()))
            .collect();
        let positions: Vec<usize> = key_refs(c, &args).iter().map(|k| k.pos).collect();
        let table_pos = crate::cmd::keys_of(&args).expect("known");
        if c.name != "set" && c.name != "bitfield" {
            assert_eq!(positions, table_pos, "{}", c.name);
        }
    }
}

#[test]
fn selector_words_split_as_sdssplitargs() {
    let cases: &[(&str, Option<&[&str]>)] = &[
        ("a b  c", Some(&["a", "b", "c"])),
        ("  ", Some(&[])),
        ("\"a b\" c", Some(&["a b", "c"])),
        ("\"\\x41\\n\"", Some(&["A\n"])),
        ("'a\\'b'", Some(&["a'b"])),
        ("ab\"cd\"", Some(&["abcd"])),
        ("\"a\"b", None),
        ("'a", None),
        ("\"a", None),
        ("a\x0bb", Some(&["a\x0bb"])),
        ("a\tb", Some(&["a", "b"])),
    ];
    for (line, want) in cases {
        let got = split_args(line.as_bytes());
        let want: Option<Vec<Vec<u8>>> =
            want.map(|w| w.iter().map(|s| s.as_bytes().to_vec()).collect());
        assert_eq!(got, want, "{line:?}");
    }
}

#[test]
fn log_groups_repeats_and_is_bounded() {
    let mut log = AclLog::new(3);
    let d = |obj: &str| Denied {
        reason: DenyReason::Key,
        pos: 1,
        object: obj.as_bytes().to_vec(),
    };
    let e = |obj: &str, t: u64| {
        LogEntry::denied(&d(obj), b"u", LogContext::Toplevel, t, b"id=1".to_vec())
    };
    log.add(e("a", 1000));
    log.add(e("a", 2000));
    assert_eq!(log.len(), 1);
    assert_eq!(
        log.entries().next().map(|x| (x.count, x.ctime_ms)),
        Some((2, 2000))
    );
    // Over 60 s apart: a new entry.
    log.add(e("a", 62_001));
    assert_eq!(log.len(), 2);
    log.add(e("b", 62_002));
    log.add(e("c", 62_003));
    log.add(e("d", 62_004));
    assert_eq!(log.len(), 3);
    let objs: Vec<&[u8]> = log.entries().map(|x| x.object.as_slice()).collect();
    assert_eq!(objs, [&b"d"[..], b"c", b"b"]);
    // A repeat moves to the front.
    log.add(e("b", 62_005));
    let objs: Vec<&[u8]> = log.entries().map(|x| x.object.as_slice()).collect();
    assert_eq!(objs, [&b"b"[..], b"d", b"c"]);
    // The reply.
    let auth = LogEntry::auth(b"x", b"AUTH", LogContext::Multi, 62_000, b"ci".to_vec());
    let mut log = AclLog::default();
    log.add(auth);
    assert_eq!(
        log.reply(10, 63_500),
        Reply::Array(Some(vec![Reply::Map(vec![
            (Reply::bulk("count"), Reply::Integer(1)),
            (Reply::bulk("reason"), Reply::bulk("auth")),
            (Reply::bulk("context"), Reply::bulk("multi")),
            (Reply::bulk("object"), Reply::bulk("AUTH")),
            (Reply::bulk("username"), Reply::bulk("x")),
            (Reply::bulk("age-seconds"), Reply::Double("1.5".into())),
            (Reply::bulk("client-info"), Reply::bulk("ci")),
        ])]))
    );
    assert_eq!(log.reply(0, 0), Reply::Array(Some(vec![])));
    // A smaller bound applies at the next new entry.
    let mut log = AclLog::new(5);
    for i in 0..5 {
        log.add(e(&i.to_string(), 0));
    }
    log.set_max_len(2);
    assert_eq!(log.len(), 5);
    log.add(e("z", 0));
    assert_eq!(log.len(), 2);
}

#[test]
fn acl_command_parses_as_redis() {
    let cases: &[(&str, Result<AclCommand<'static>, &str>)] = &[
        ("ACL", Err("ERR wrong number of arguments for 'acl' command")),
        ("ACL nosuch", Err("ERR unknown subcommand 'nosuch'. Try ACL HELP.")),
        ("acl setuser", Err("ERR wrong number of arguments for 'acl|setuser' command")),
        ("ACL GETUSER a b", Err("ERR wrong number of arguments for 'acl|getuser' command")),
        ("ACL LOG 1 2", Err("ERR unknown subcommand or wrong number of arguments for 'LOG'. Try ACL HELP.")),
        ("ACL CAT a b", Err("ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.")),
        ("ACL GENPASS 0", Err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")),
        ("ACL GENPASS x", Err("ERR value is not an integer or out of range")),
        ("ACL LOG x", Err("ERR value is not an integer or out of range")),
        ("ACL DELUSER a default", Err("ERR The 'default' user cannot be removed")),
        ("ACL LOG -5", Ok(AclCommand::Log(LogRequest::Show(0)))),
        ("ACL LOG reset", Ok(AclCommand::Log(LogRequest::Reset))),
        ("ACL LOG", Ok(AclCommand::Log(LogRequest::Show(10)))),
        ("ACL GENPASS", Ok(AclCommand::GenPass { bits: 256 })),
        ("ACL LIST", Ok(AclCommand::List)),
        ("ACL whoami", Ok(AclCommand::WhoAmI)),
    ];
    for (line, want) in cases {
        let args = words(line);
        let got = AclCommand::parse(&args);
        match (got, want) {
            (Ok(c), Ok(w)) => assert_eq!(c, *w, "{line}"),
            (Err(e), Err(w)) => assert_eq!(e, Reply::err(*w), "{line}"),
            (got, _) => panic!("{line}: {got:?}"),
        }
    }
    let args = words("ACL SETUSER u on");
    assert!(AclCommand::parse(&args).is_ok_and(|c| c.is_write()));
    let args = vec![b"ACL".to_vec(), b"SETUSER".to_vec(), b"a b".to_vec()];
    assert_eq!(
        AclCommand::parse(&args),
        Err(Reply::err(
            "ERR Usernames can't contain spaces or null characters"
        ))
    );
    // GENPASS from the random bytes.
    let mut random = [0u8; GENPASS_RANDOM_BYTES];
    for (i, b) in random.iter_mut().enumerate() {
        *b = i as u8;
    }
    assert_eq!(genpass(5, &random), Reply::bulk("01"));
    assert_eq!(genpass(17, &random), Reply::bulk("01234"));
}

#[test]
fn acl_files_load_as_redis() {
    let t = UserTable::new();
    let ok = t
        .load_text(
            b"user a on >p ~k* +get\n\n  user b off (~x +set)  \r\n",
            "f.acl",
        )
        .expect("loads");
    assert_eq!(
        line(&ok, "a"),
        "user a on #148de9c5a7a44d19e56cd9ae1a554bf67847afb0c58f6e12fa29ac7ddfca9940 ~k* resetchannels -@all +get"
    );
    assert_eq!(
        line(&ok, "b"),
        "user b off resetchannels -@all (~x resetchannels -@all +set)"
    );
    assert_eq!(line(&ok, "default"), "user default on nopass ~* &* +@all");
    let tail =
        "WARNING: ACL errors detected, no change to the previously active ACL rules was performed";
    let cases: &[(&str, &str)] = &[
        ("usr a on", "f.acl:1 should start with user keyword followed by the username. "),
        ("user", "f.acl:1 should start with user keyword followed by the username. "),
        ("user a\tb on", "'f.acl:1: username 'a\tb' contains invalid characters. "),
        ("user a on\nuser a off", "WARNING: Duplicate user 'a' found on line 2. "),
        ("user a +nosuch +nope #x", "f.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. f.acl:1: Error in applying operation '+nope': Unknown command or category name in ACL. f.acl:1: The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters. "),
        ("user a #x allkeys ~y +no", "f.acl:1: The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters. f.acl:1: Error in applying operation '+no': Unknown command or category name in ACL. "),
        ("user a (~x", "f.acl:1: Unmatched parenthesis in selector definition."),
    ];
    for (file, want) in cases {
        let e = t.load_text(file.as_bytes(), "f.acl").expect_err(file);
        assert_eq!(e, AclError::Load(format!("{want}{tail}")), "{file}");
    }
    // SAVE then LOAD gives the same table.
    let mut t = UserTable::new();
    setuser(
        &mut t,
        "a",
        "on >p %R~a* &c +@read -get (+set ~w*) (+select|1)",
    )
    .expect("a");
    setuser(&mut t, "default", "-@dangerous").expect("default");
    let again = t.load_text(&t.save_text(), "f").expect("reload");
    assert_eq!(again, t);
}

/// Random rules for the round-trip tests.
fn random_rules(r: &mut SplitMix) -> Vec<String> {
    let u = universe();
    let mut out = Vec::new();
    for _ in 0..r.below(8) {
        let rule = match r.below(12) {
            0 => format!("+@{}", CATEGORIES[r.below(CATEGORIES.len())]),
            1 => format!("-@{}", CATEGORIES[r.below(CATEGORIES.len())]),
            2 | 3 => format!("+{}", u.cmds[r.below(u.cmds.len())].spec.name),
            4 | 5 => format!("-{}", u.cmds[r.below(u.cmds.len())].spec.name),
            6 => "+@all".into(),
            7 => format!("+select|{}", r.below(3)),
            8 => format!("~k{}", r.below(3)),
            9 => format!("%R~r{}", r.below(3)),
            10 => format!("(+get ~s{} &c)", r.below(3)),
            _ => format!(">p{}", r.below(3)),
        };
        out.push(rule);
    }
    out
}

#[test]
fn descriptions_rebuild_the_same_user() {
    let mut r = SplitMix::new(7);
    for _ in 0..300 {
        let mut t = UserTable::new();
        let rules = random_rules(&mut r);
        t.apply_setuser(b"u", &rules).expect("valid");
        let user = t.user(b"u").expect("u").clone();
        // The description, applied to a fresh user, gives the same bitmaps.
        let described = user.describe();
        let text = String::from_utf8(described).expect("utf8");
        let mut again = UserTable::new();
        let ws: Vec<&str> = text.split(' ').collect();
        again
            .apply_setuser(b"u", &ws)
            .expect("described rules apply");
        let back = again.user(b"u").expect("u");
        assert_eq!(back.root.bits, user.root.bits, "{rules:?} -> {text}");
        assert_eq!(back.describe(), user.describe(), "{rules:?}");
        for (a, b) in back.selectors.iter().zip(&user.selectors) {
            assert_eq!(a.bits, b.bits);
        }
    }
}

#[test]
fn binary_form_round_trips_and_refuses_garbage() {
    let mut r = SplitMix::new(11);
    for _ in 0..100 {
        let mut t = UserTable::new();
        t.set_pubsub_default(r.below(2) == 0);
        for name in ["a", "b", "default", "zz"] {
            let rules = random_rules(&mut r);
            let _ = t.apply_setuser(name.as_bytes(), &rules);
        }
        let enc = t.encode();
        let back = UserTable::decode(&enc).expect("decodes");
        assert_eq!(back, t);
        assert_eq!(back.encode(), enc);
        // Every truncation, and random byte flips: an error or a valid
        // table, never a panic.
        for n in 0..enc.len() {
            assert!(UserTable::decode(&enc[..n]).is_err());
        }
        for _ in 0..50 {
            let mut bad = enc.clone();
            let i = r.below(bad.len());
            bad[i] ^= 1 << r.below(8);
            if let Ok(t2) = UserTable::decode(&bad) {
                assert_eq!(UserTable::decode(&t2.encode()), Ok(t2));
            }
        }
    }
    assert_eq!(
        UserTable::decode(b"XACL\x02"),
        Err(AclDecodeError::Version(2))
    );
    assert_eq!(UserTable::decode(b"nope"), Err(AclDecodeError::Magic));
    // A huge count with nothing behind it allocates nothing.
    let mut big = b"XACL\x01\x00".to_vec();
    big.extend_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(UserTable::decode(&big), Err(AclDecodeError::Truncated));
}

#[test]
fn cat_and_getuser_replies() {
    assert_eq!(
        cat_reply(Some(b"nosuch")),
        Reply::err("ERR Unknown category 'nosuch'")
    );
    let Reply::Array(Some(cats)) = cat_reply(None) else {
        panic!()
    };
    assert_eq!(cats.len(), 21);
    let Reply::Array(Some(tx)) = cat_reply(Some(b"TRANSACTION")) else {
        panic!()
    };
    let mut names: Vec<Reply> = tx;
    names.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(
        names,
        ["discard", "exec", "multi", "unwatch", "watch"]
            .map(Reply::bulk)
            .to_vec()
    );
    let mut t = UserTable::new();
    setuser(&mut t, "u", "on >a %R~k* &c (+get ~x)").expect("u");
    assert_eq!(
        t.getuser_reply(b"u"),
        Reply::Map(vec![
            (Reply::bulk("flags"), Reply::Set(vec![Reply::bulk("on")])),
            (
                Reply::bulk("passwords"),
                Reply::Array(Some(vec![Reply::bulk(
                    "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
                )]))
            ),
            (Reply::bulk("commands"), Reply::bulk("-@all")),
            (Reply::bulk("keys"), Reply::bulk("%R~k*")),
            (Reply::bulk("channels"), Reply::bulk("&c")),
            (
                Reply::bulk("selectors"),
                Reply::Array(Some(vec![Reply::Map(vec![
                    (Reply::bulk("commands"), Reply::bulk("-@all +get")),
                    (Reply::bulk("keys"), Reply::bulk("~x")),
                    (Reply::bulk("channels"), Reply::bulk("")),
                ])]))
            ),
        ])
    );
    assert_eq!(t.getuser_reply(b"nobody"), Reply::nil());
    // Channels revoked: subscribers must be checked.
    let out = setuser(&mut t, "u", "resetchannels &d").expect("u");
    assert!(out.recheck_subscriptions && !out.created);
    let out = setuser(&mut t, "u", "&e").expect("u");
    assert!(!out.recheck_subscriptions);
    assert!(t
        .user(b"u")
        .is_some_and(|u| u.check_channel(b"d", false) && !u.check_channel(b"c", false)));
}
