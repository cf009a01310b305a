use proptest::prelude::*;

use crate::*;

type Op = Operation<KvInput, KvOutput>;

fn ret(c: u64, i: KvInput, call: u64, o: KvOutput, at: u64) -> Op {
    Operation::returned(c, i, call, o, at)
}
fn val(v: &str) -> KvOutput {
    KvOutput::Value(Some(v.as_bytes().to_vec()))
}
const NIL: KvOutput = KvOutput::Value(None);

enum Expect {
    Lin,
    NotLin,
}

fn table() -> Vec<(&'static str, Vec<Op>, Expect)> {
    use Expect::*;
    vec![
        ("empty", vec![], Lin),
        (
            "sequential put then get",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 1),
                ret(2, KvInput::get("x"), 2, val("1"), 3),
            ],
            Lin,
        ),
        (
            "stale read after completed put",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 1),
                ret(1, KvInput::put("x", "2"), 2, KvOutput::Ok, 3),
                ret(2, KvInput::get("x"), 4, val("1"), 5),
            ],
            NotLin,
        ),
        (
            "lost write: read of initial value after acked put",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 1),
                ret(2, KvInput::get("x"), 2, NIL, 3),
            ],
            NotLin,
        ),
        (
            "read of a value never written",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 5),
                ret(2, KvInput::get("x"), 1, val("7"), 4),
            ],
            NotLin,
        ),
        (
            "reads see new then old value during a put",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 10),
                ret(2, KvInput::get("x"), 1, val("1"), 2),
                ret(3, KvInput::get("x"), 3, NIL, 4),
            ],
            NotLin,
        ),
        (
            "concurrent reads see old then new",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 10),
                ret(2, KvInput::get("x"), 1, NIL, 2),
                ret(3, KvInput::get("x"), 3, val("1"), 4),
            ],
            Lin,
        ),
        (
            "reads on different clients may order concurrent writes oppositely only if overlapping",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 10),
                ret(2, KvInput::put("x", "2"), 0, KvOutput::Ok, 10),
                ret(3, KvInput::get("x"), 11, val("1"), 12),
                ret(4, KvInput::get("x"), 13, val("2"), 14),
            ],
            NotLin,
        ),
        (
            "overlapping reads of two concurrent writes",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 10),
                ret(2, KvInput::put("x", "2"), 0, KvOutput::Ok, 10),
                ret(3, KvInput::get("x"), 1, val("1"), 9),
                ret(4, KvInput::get("x"), 2, val("2"), 8),
            ],
            Lin,
        ),
        (
            "unknown-outcome put may have happened",
            vec![
                Operation::unknown(1, KvInput::put("x", "1"), 0),
                ret(2, KvInput::get("x"), 5, val("1"), 6),
            ],
            Lin,
        ),
        (
            "unknown-outcome put may never happen",
            vec![
                Operation::unknown(1, KvInput::put("x", "1"), 0),
                ret(2, KvInput::get("x"), 5, NIL, 6),
            ],
            Lin,
        ),
        (
            "unknown-outcome put takes effect late, after an earlier read saw nil",
            vec![
                Operation::unknown(1, KvInput::put("x", "1"), 0),
                ret(2, KvInput::get("x"), 5, NIL, 6),
                ret(2, KvInput::get("x"), 7, val("1"), 8),
            ],
            Lin,
        ),
        (
            "unknown-outcome put cannot be undone once seen",
            vec![
                Operation::unknown(1, KvInput::put("x", "1"), 0),
                ret(2, KvInput::get("x"), 5, val("1"), 6),
                ret(2, KvInput::get("x"), 7, NIL, 8),
            ],
            NotLin,
        ),
        (
            "unknown-outcome put cannot act before its call",
            vec![
                ret(2, KvInput::get("x"), 0, val("1"), 1),
                Operation::unknown(1, KvInput::put("x", "1"), 5),
            ],
            NotLin,
        ),
        (
            "incr counts concurrent increments",
            vec![
                ret(1, KvInput::incr("c", 1), 0, KvOutput::Int(2), 10),
                ret(2, KvInput::incr("c", 1), 1, KvOutput::Int(1), 9),
                ret(3, KvInput::get("c"), 11, val("2"), 12),
            ],
            Lin,
        ),
        (
            "incr lost update",
            vec![
                ret(1, KvInput::incr("c", 1), 0, KvOutput::Int(1), 10),
                ret(2, KvInput::incr("c", 1), 1, KvOutput::Int(1), 9),
            ],
            NotLin,
        ),
        (
            "unknown incr may explain a jump",
            vec![
                Operation::unknown(1, KvInput::incr("c", 5), 0),
                ret(2, KvInput::incr("c", 1), 3, KvOutput::Int(6), 4),
            ],
            Lin,
        ),
        (
            "incr on non-integer errors",
            vec![
                ret(1, KvInput::put("c", "a"), 0, KvOutput::Ok, 1),
                ret(2, KvInput::incr("c", 1), 2, KvOutput::Error, 3),
                ret(2, KvInput::get("c"), 4, val("a"), 5),
            ],
            Lin,
        ),
        (
            "delete then read nil; delete count must match",
            vec![
                ret(1, KvInput::put("d", "1"), 0, KvOutput::Ok, 1),
                ret(1, KvInput::delete("d"), 2, KvOutput::Count(1), 3),
                ret(2, KvInput::get("d"), 4, NIL, 5),
                ret(2, KvInput::delete("d"), 6, KvOutput::Count(0), 7),
            ],
            Lin,
        ),
        (
            "delete count wrong",
            vec![ret(1, KvInput::delete("d"), 0, KvOutput::Count(1), 1)],
            NotLin,
        ),
        (
            "keys are independent",
            vec![
                ret(1, KvInput::put("a", "1"), 0, KvOutput::Ok, 1),
                ret(2, KvInput::get("b"), 2, NIL, 3),
                ret(2, KvInput::get("a"), 4, val("1"), 5),
            ],
            Lin,
        ),
        (
            "violation on second key only",
            vec![
                ret(1, KvInput::put("a", "1"), 0, KvOutput::Ok, 1),
                ret(1, KvInput::put("b", "1"), 2, KvOutput::Ok, 3),
                ret(2, KvInput::get("a"), 4, val("1"), 5),
                ret(2, KvInput::get("b"), 6, NIL, 7),
            ],
            NotLin,
        ),
        (
            "touching intervals count as concurrent",
            vec![
                ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 5),
                ret(2, KvInput::get("x"), 5, NIL, 6),
            ],
            Lin,
        ),
    ]
}

#[test]
fn table_driven() {
    for (name, h, want) in table() {
        let r = check(&KvModel, &h, &CheckOptions::default()).expect(name);
        match (want, &r.verdict) {
            (Expect::Lin, Verdict::Linearizable) => {}
            (Expect::NotLin, Verdict::NotLinearizable(v)) => {
                // The explanation's prefix itself must fail, and the culprit is in it.
                let again = check(&KvModel, &v.prefix, &CheckOptions::default()).expect(name);
                assert!(
                    matches!(again.verdict, Verdict::NotLinearizable(_)),
                    "{name}: reported prefix passes"
                );
                assert!(
                    v.prefix.iter().any(|o| o.input == v.culprit.input),
                    "{name}"
                );
            }
            (_, got) => panic!("{name}: got {got}"),
        }
    }
}

#[test]
fn minimal_prefix_is_minimal() {
    // Violation happens at op 3; many later harmless ops follow.
    let mut h = vec![
        ret(1, KvInput::put("x", "1"), 0, KvOutput::Ok, 1),
        ret(1, KvInput::put("x", "2"), 2, KvOutput::Ok, 3),
        ret(2, KvInput::get("x"), 4, val("1"), 5),
    ];
    for i in 0..50u64 {
        h.push(ret(
            3,
            KvInput::put("x", "9"),
            10 + 2 * i,
            KvOutput::Ok,
            11 + 2 * i,
        ));
    }
    let r = check(&KvModel, &h, &CheckOptions::default()).expect("valid");
    let Verdict::NotLinearizable(v) = r.verdict else {
        panic!("expected violation");
    };
    assert_eq!(v.prefix.len(), 3);
    assert_eq!(v.culprit, h[2]);
    assert_eq!(v.key, b"x".to_vec());
    let text = v.to_string();
    assert!(text.contains("not linearizable"), "{text}");
}

#[test]
fn bad_history_rejected() {
    let h = vec![ret(1, KvInput::get("x"), 5, NIL, 4)];
    assert_eq!(
        check(&KvModel, &h, &CheckOptions::default()),
        Err(HistoryError::ReturnBeforeCall {
            index: 0,
            call: 5,
            at: 4
        })
    );
}

#[test]
fn search_bound_gives_unknown() {
    // Many fully concurrent increments whose results make only one order valid: the
    // search must explore; with a tiny bound it gives up and says so.
    let n = 12i64;
    let h: Vec<Op> = (0..n)
        .map(|i| {
            ret(
                i as u64,
                KvInput::incr("c", 1),
                0,
                KvOutput::Int(n - i),
                100,
            )
        })
        .collect();
    let opts = CheckOptions {
        max_steps_per_partition: 5,
        minimize: true,
    };
    let r = check(&KvModel, &h, &opts).expect("valid");
    assert!(
        matches!(r.verdict, Verdict::Unknown { ref key, .. } if key == b"c"),
        "{}",
        r.verdict
    );
    let r = check(&KvModel, &h, &CheckOptions::default()).expect("valid");
    assert!(r.verdict.is_linearizable(), "{}", r.verdict);
}

#[test]
fn recorder_lifecycle() {
    let mut rec: HistoryRecorder<KvInput, KvOutput> = HistoryRecorder::new();
    let a = rec.invoke(1, KvInput::put("x", "1"), 0);
    let b = rec.invoke(2, KvInput::put("x", "2"), 1);
    let c = rec.invoke(3, KvInput::get("x"), 2);
    rec.complete(a, KvOutput::Ok, 3).expect("open");
    rec.fail(b).expect("open");
    assert_eq!(
        rec.complete(a, KvOutput::Ok, 4),
        Err(RecordError::AlreadyClosed(0))
    );
    assert_eq!(
        rec.complete(OpHandle(9), KvOutput::Ok, 4),
        Err(RecordError::UnknownHandle(9))
    );
    assert!(rec.is_open(c));
    let d = rec.invoke(4, KvInput::get("x"), 10);
    assert!(matches!(
        rec.complete(d, NIL, 9),
        Err(RecordError::ReturnBeforeCall { .. })
    ));
    rec.abandon(d).expect("open");
    let h = rec.finish();
    assert_eq!(h.len(), 3);
    assert_eq!(h[1].outcome, Outcome::Unknown);
    assert_eq!(h[2].outcome, Outcome::Unknown);
}

#[test]
fn parse_int_like_redis() {
    for (s, want) in [
        ("0", Some(0)),
        ("-5", Some(-5)),
        ("12", Some(12)),
        ("+1", None),
        ("01", None),
        ("-0", None),
        ("", None),
        ("1 ", None),
        ("9223372036854775808", None),
    ] {
        assert_eq!(kv::parse_int(s.as_bytes()), want, "{s:?}");
    }
}

/// Builds a history from a sequential run: op `i` takes effect at time `10 * i + 5`, its
/// interval stretched randomly around that point; some ops are unknown-outcome (applied
/// or not).
fn sequential_history(
    ops: &[(u8, u8, i64)],
    widths: &[(u64, u64, u8)],
) -> (Vec<Op>, Vec<Option<Vec<u8>>>) {
    let mut state: Vec<Option<Vec<u8>>> = vec![None; 3];
    let mut h = Vec::new();
    for (i, (&(key, kind, arg), &(l, r, fate))) in ops.iter().zip(widths).enumerate() {
        let key_name = format!("k{}", key % 3);
        let input = match kind % 4 {
            0 => KvInput::get(key_name),
            1 => KvInput::put(key_name, arg.to_string()),
            2 => KvInput::incr(key_name, arg),
            _ => KvInput::delete(key_name),
        };
        let point = 10 * i as u64 + 5;
        let call = point.saturating_sub(l);
        let cur = &mut state[usize::from(key % 3)];
        // fate 0: unknown and not applied; 1: unknown and applied; else completed.
        if fate % 8 == 0 {
            h.push(Operation::unknown(i as u64, input, call));
            continue;
        }
        let next = KvModel
            .step(cur, &input, None)
            .expect("total on unknown output");
        let output = match &input.call {
            KvCall::Get => KvOutput::Value(cur.clone()),
            KvCall::Put(_) => KvOutput::Ok,
            KvCall::Incr(d) => {
                let c = match cur {
                    None => Some(0),
                    Some(b) => kv::parse_int(b),
                };
                c.and_then(|c| c.checked_add(*d))
                    .map_or(KvOutput::Error, KvOutput::Int)
            }
            KvCall::Delete => KvOutput::Count(u64::from(cur.is_some())),
        };
        *cur = next;
        if fate % 8 == 1 {
            h.push(Operation::unknown(i as u64, input, call));
        } else {
            h.push(ret(i as u64, input, call, output, point + r));
        }
    }
    (h, state)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn sequential_executions_are_linearizable(
        ops in proptest::collection::vec((0u8..3, 0u8..4, -3i64..4), 0..40),
        widths in proptest::collection::vec((0u64..25, 0u64..25, any::<u8>()), 40),
    ) {
        let (h, _) = sequential_history(&ops, &widths);
        let r = check(&KvModel, &h, &CheckOptions::default()).expect("valid");
        prop_assert!(r.verdict.is_linearizable(), "{}", r.verdict);
    }

    #[test]
    fn final_read_of_a_wrong_value_is_caught(
        ops in proptest::collection::vec((0u8..3, 1u8..3, 0i64..4), 1..30),
        widths in proptest::collection::vec((0u64..25, 0u64..25, 2u8..8), 30),
    ) {
        // All ops completed; a read strictly after everything must see the final value.
        let (mut h, state) = sequential_history(&ops, &widths);
        let end = 10 * ops.len() as u64 + 100;
        let wrong = match &state[0] {
            Some(v) if v == b"999" => b"998".to_vec(),
            _ => b"999".to_vec(),
        };
        h.push(ret(99, KvInput::get("k0"), end, KvOutput::Value(Some(wrong)), end + 1));
        let r = check(&KvModel, &h, &CheckOptions::default()).expect("valid");
        prop_assert!(matches!(r.verdict, Verdict::NotLinearizable(_)), "{}", r.verdict);
    }
}
