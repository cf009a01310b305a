//! Scripts as members apply them: the same ops give the same replies and
//! byte-identical stores, a script past its budget changes nothing, and
//! the script cache and libraries travel in snapshots.

use crate::dispatch::{classify, Action};
use crate::exec::Apply;
use crate::resp::Reply;
use crate::store::Store;

const T0: u64 = 1_700_000_000_000;

fn words(ws: &[&str]) -> Vec<Vec<u8>> {
    ws.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Builds the op of `ws` once (as the leader does) and applies it to every
/// member; their replies must agree.
fn apply_all(members: &mut [Store], ws: &[&str], at: u64) -> Reply {
    let Action::Write(op) = classify(words(ws), at) else {
        panic!("{ws:?} is not a write");
    };
    let replies: Vec<Reply> = members.iter_mut().map(|m| m.apply(&op)).collect();
    for r in &replies[1..] {
        assert_eq!(r, &replies[0], "{ws:?}");
    }
    replies[0].clone()
}

fn assert_identical(members: &[Store]) {
    let first = members[0].snapshot();
    for m in &members[1..] {
        assert!(m.snapshot() == first, "members differ");
    }
}

#[test]
fn members_running_the_same_scripts_end_identical() {
    let mut members = [Store::new(), Store::new(), Store::new()];
    let random_writes = "for i = 1, 20 do redis.call('SADD', KEYS[1], math.random(1000000)) end \
                         return redis.call('SPOP', KEYS[1], 3)";
    let steps: &[&[&str]] = &[
        &["EVAL", random_writes, "1", "s"],
        &["EVAL", "return redis.call('TIME')", "0"],
        &["EVAL", "redis.call('SET', KEYS[1], cjson.encode({a = ARGV[1]})) return redis.call('GET', KEYS[1])", "1", "j", "x"],
        &["SCRIPT", "LOAD", "return redis.call('INCRBY', KEYS[1], ARGV[1])"],
        &["FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('bump', function(k, a) return redis.call('INCR', k[1]) end)"],
        &["FCALL", "bump", "1", "n"],
        &["EVAL", "return redis.pcall('LPUSH', KEYS[1], 'x')", "1", "j"],
    ];
    for (i, ws) in steps.iter().enumerate() {
        let r = apply_all(&mut members, ws, T0 + i as u64);
        assert!(
            !matches!(r, Reply::Error(ref e) if !e.starts_with("WRONGTYPE")),
            "{ws:?}: {r:?}"
        );
    }
    assert_identical(&members);
    // A member restored from a snapshot finds the cache and the library.
    let mut restored = Store::restore(&members[0].snapshot()).expect("restores");
    let sha = crate::script::state::sha1_hex(b"return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let evalsha = ["EVALSHA", std::str::from_utf8(&sha).unwrap(), "1", "n", "5"];
    let mut all = [members[0].clone(), restored.clone()];
    assert_eq!(apply_all(&mut all, &evalsha, T0 + 100), Reply::Integer(6));
    let Action::Write(op) = classify(words(&["FCALL", "BUMP", "1", "n"]), T0 + 101) else {
        panic!("fcall is a write");
    };
    assert_eq!(restored.apply(&op), Reply::Integer(2));
}

#[test]
fn a_script_past_its_budget_changes_nothing_on_any_member() {
    let mut members = [Store::new(), Store::new()];
    apply_all(&mut members, &["SET", "k", "before"], T0);
    let before = members[0].snapshot();
    let r = apply_all(
        &mut members,
        &[
            "EVAL",
            "redis.call('SET', 'k', 'after') redis.call('DEL', 'k') while true do end",
            "0",
        ],
        T0 + 1,
    );
    assert!(
        matches!(r, Reply::Error(ref e) if e.contains("budget")),
        "{r:?}"
    );
    assert_identical(&members);
    // Only the cached body differs from before: the keys are as they were.
    let get = apply_all(
        &mut members,
        &["EVAL", "return redis.call('GET', 'k')", "0"],
        T0 + 2,
    );
    assert_eq!(get, Reply::bulk("before"));
    assert!(members[0].snapshot().len() > before.len());
}

#[test]
fn a_script_runs_its_commands_as_its_caller() {
    let mut members = [Store::new()];
    let setuser = crate::op::WriteOp::new(
        T0,
        crate::op::WriteCmd::Acl {
            args: words(&[
                "SETUSER",
                "bob",
                "on",
                "nopass",
                "+@scripting",
                "+get",
                "~*",
            ]),
        },
    );
    members[0].apply(&setuser);
    let Action::Write(mut op) = classify(
        words(&["EVAL", "return redis.pcall('SET', KEYS[1], 'v')", "1", "k"]),
        T0 + 1,
    ) else {
        panic!("eval is a write");
    };
    op.cmd.stamp_script_caller(b"bob", false, false);
    let r = members[0].apply(&op);
    assert!(
        matches!(r, Reply::Error(ref e) if e.contains("can't run this command")),
        "{r:?}"
    );
    op.cmd.stamp_script_caller(b"default", false, false);
    assert_eq!(members[0].apply(&op), Reply::ok());
}
