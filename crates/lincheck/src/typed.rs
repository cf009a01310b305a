//! [`TypedModel`]: a Redis key space of strings, hashes, lists, sets and
//! sorted sets, partitioned per key, with `MULTI`/`EXEC` over one key.
//!
//! Each key is one partition whose state is its value (absent, or a value
//! of one type); a command on a key of another type is `WRONGTYPE` and
//! changes nothing; a collection emptied by a removal is deleted, as Redis
//! does. A transaction ([`TypedCall::Multi`]) runs its commands on its key
//! atomically and answers each in order — the linearization must place all
//! of them at one point. Transactions span one key so that partitions stay
//! independent (P-compositionality).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::check::Model;

/// A value of one type.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypedValue {
    /// A string.
    Str(Vec<u8>),
    /// A hash: field → value.
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    /// A list.
    List(Vec<Vec<u8>>),
    /// A set.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set of integer scores: member → score.
    ZSet(BTreeMap<Vec<u8>, i64>),
}

/// One command on the key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypedCall {
    /// `GET`.
    Get,
    /// `SET value`.
    Set(Vec<u8>),
    /// `DEL`.
    Del,
    /// `HSET field value`: fields added.
    HSet(Vec<u8>, Vec<u8>),
    /// `HGET field`.
    HGet(Vec<u8>),
    /// `HDEL field`: fields removed.
    HDel(Vec<u8>),
    /// `HGETALL`: field, value, field, value… in field order.
    HGetAll,
    /// `RPUSH item`: the new length.
    RPush(Vec<u8>),
    /// `LPOP`: the first item or nil.
    LPop,
    /// `LRANGE 0 -1`.
    LRange,
    /// `SADD member`: members added.
    SAdd(Vec<u8>),
    /// `SREM member`: members removed.
    SRem(Vec<u8>),
    /// `SMEMBERS`, in member order.
    SMembers,
    /// `ZINCRBY delta member`: the new score.
    ZIncrBy(i64, Vec<u8>),
    /// `ZREM member`: members removed.
    ZRem(Vec<u8>),
    /// `ZRANGE 0 -1 WITHSCORES`: member, score… by score then member.
    ZRange,
    /// `MULTI`, these commands, `EXEC` (no nesting).
    Multi(Vec<TypedCall>),
}

/// An operation: a key and a command on it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TypedInput {
    /// The key (the partition).
    pub key: Vec<u8>,
    /// The command.
    pub call: TypedCall,
}

impl TypedInput {
    /// `call` on `key`.
    pub fn new(key: impl Into<Vec<u8>>, call: TypedCall) -> Self {
        TypedInput {
            key: key.into(),
            call,
        }
    }
}

/// What a command answered.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TypedOutput {
    /// `+OK`.
    Ok,
    /// An integer.
    Int(i64),
    /// A bulk string or nil.
    Bulk(Option<Vec<u8>>),
    /// An array of bulk strings (scores as their decimal text).
    Items(Vec<Vec<u8>>),
    /// `WRONGTYPE`.
    WrongType,
    /// `EXEC`'s replies, one per command.
    Exec(Vec<TypedOutput>),
}

/// The sequential specification. See the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TypedModel;

type State = Option<TypedValue>;

/// Applies one (non-`Multi`) command: the next state and the reply.
fn apply(state: &State, call: &TypedCall) -> (State, TypedOutput) {
    use TypedCall as C;
    use TypedOutput as O;
    use TypedValue as V;
    let wrong = (state.clone(), O::WrongType);
    // The collection of the command's type (empty when absent), or None
    // for a value of another type.
    macro_rules! coll {
        ($variant:ident) => {
            match state {
                None => Default::default(),
                Some(V::$variant(c)) => c.clone(),
                Some(_) => return wrong,
            }
        };
    }
    // A collection, deleted when empty.
    fn keep<T>(c: T, empty: bool, wrap: fn(T) -> TypedValue) -> State {
        (!empty).then(|| wrap(c))
    }
    match call {
        C::Get => match state {
            None => (None, O::Bulk(None)),
            Some(V::Str(v)) => (state.clone(), O::Bulk(Some(v.clone()))),
            Some(_) => wrong,
        },
        C::Set(v) => (Some(V::Str(v.clone())), O::Ok),
        C::Del => (None, O::Int(i64::from(state.is_some()))),
        C::HSet(f, v) => {
            let mut h: BTreeMap<_, _> = coll!(Hash);
            let added = h.insert(f.clone(), v.clone()).is_none();
            (Some(V::Hash(h)), O::Int(i64::from(added)))
        }
        C::HGet(f) => {
            let h: BTreeMap<_, _> = coll!(Hash);
            (state.clone(), O::Bulk(h.get(f).cloned()))
        }
        C::HDel(f) => {
            let mut h: BTreeMap<_, _> = coll!(Hash);
            let n = h.remove(f).is_some();
            let e = h.is_empty();
            (keep(h, e, V::Hash), O::Int(i64::from(n)))
        }
        C::HGetAll => {
            let h: BTreeMap<_, _> = coll!(Hash);
            let items = h.into_iter().flat_map(|(f, v)| [f, v]).collect();
            (state.clone(), O::Items(items))
        }
        C::RPush(x) => {
            let mut l: Vec<_> = coll!(List);
            l.push(x.clone());
            let n = l.len() as i64;
            (Some(V::List(l)), O::Int(n))
        }
        C::LPop => {
            let mut l: Vec<_> = coll!(List);
            if l.is_empty() {
                return (state.clone(), O::Bulk(None));
            }
            let x = l.remove(0);
            let e = l.is_empty();
            (keep(l, e, V::List), O::Bulk(Some(x)))
        }
        C::LRange => {
            let l: Vec<_> = coll!(List);
            (state.clone(), O::Items(l))
        }
        C::SAdd(m) => {
            let mut s: BTreeSet<_> = coll!(Set);
            let added = s.insert(m.clone());
            (Some(V::Set(s)), O::Int(i64::from(added)))
        }
        C::SRem(m) => {
            let mut s: BTreeSet<_> = coll!(Set);
            let n = s.remove(m);
            let e = s.is_empty();
            (keep(s, e, V::Set), O::Int(i64::from(n)))
        }
        C::SMembers => {
            let s: BTreeSet<_> = coll!(Set);
            (state.clone(), O::Items(s.into_iter().collect()))
        }
        C::ZIncrBy(d, m) => {
            let mut z: BTreeMap<_, _> = coll!(ZSet);
            let s = z.entry(m.clone()).or_insert(0);
            *s += d;
            let s = *s;
            (Some(V::ZSet(z)), O::Bulk(Some(s.to_string().into_bytes())))
        }
        C::ZRem(m) => {
            let mut z: BTreeMap<_, _> = coll!(ZSet);
            let n = z.remove(m).is_some();
            let e = z.is_empty();
            (keep(z, e, V::ZSet), O::Int(i64::from(n)))
        }
        C::ZRange => {
            let z: BTreeMap<_, _> = coll!(ZSet);
            let mut by: Vec<(i64, Vec<u8>)> = z.into_iter().map(|(m, s)| (s, m)).collect();
            by.sort();
            let items = by
                .into_iter()
                .flat_map(|(s, m)| [m, s.to_string().into_bytes()])
                .collect();
            (state.clone(), O::Items(items))
        }
        C::Multi(cmds) => {
            let mut st = state.clone();
            let mut out = Vec::with_capacity(cmds.len());
            for c in cmds {
                let (next, o) = match c {
                    C::Multi(_) => (st.clone(), O::WrongType),
                    c => apply(&st, c),
                };
                st = next;
                out.push(o);
            }
            (st, O::Exec(out))
        }
    }
}

impl Model for TypedModel {
    type Key = Vec<u8>;
    type State = State;
    type Input = TypedInput;
    type Output = TypedOutput;

    fn partition(&self, input: &TypedInput) -> Vec<u8> {
        input.key.clone()
    }

    fn init(&self) -> State {
        None
    }

    fn step(
        &self,
        state: &State,
        input: &TypedInput,
        output: Option<&TypedOutput>,
    ) -> Option<State> {
        let (next, expect) = apply(state, &input.call);
        match output {
            None => Some(next),
            Some(o) if *o == expect => Some(next),
            Some(_) => None,
        }
    }
}

impl fmt::Debug for TypedInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} {:?}",
            self.call,
            String::from_utf8_lossy(&self.key)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{check, CheckOptions, Operation};
    use TypedCall as C;
    use TypedOutput as O;

    type Op = Operation<TypedInput, TypedOutput>;

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }
    fn items(v: &[&str]) -> O {
        O::Items(v.iter().map(|s| b(s)).collect())
    }
    fn ret(c: u64, key: &str, call: C, t: (u64, u64), o: O) -> Op {
        Operation::returned(c, TypedInput::new(key, call), t.0, o, t.1)
    }

    /// Sequential behaviour: (commands in order on one key, replies).
    #[test]
    fn sequential_semantics() {
        let rows: &[(&str, Vec<(C, O)>)] = &[
            (
                "hash",
                vec![
                    (C::HSet(b("f"), b("1")), O::Int(1)),
                    (C::HSet(b("f"), b("2")), O::Int(0)),
                    (C::HSet(b("a"), b("3")), O::Int(1)),
                    (C::HGetAll, items(&["a", "3", "f", "2"])),
                    (C::HDel(b("f")), O::Int(1)),
                    (C::HDel(b("a")), O::Int(1)),
                    // Emptied: gone, so another type may take the key.
                    (C::RPush(b("x")), O::Int(1)),
                ],
            ),
            (
                "list",
                vec![
                    (C::LPop, O::Bulk(None)),
                    (C::RPush(b("a")), O::Int(1)),
                    (C::RPush(b("b")), O::Int(2)),
                    (C::LRange, items(&["a", "b"])),
                    (C::LPop, O::Bulk(Some(b("a")))),
                    (C::Get, O::WrongType),
                    (C::LPop, O::Bulk(Some(b("b")))),
                    (C::Get, O::Bulk(None)),
                ],
            ),
            (
                "set",
                vec![
                    (C::SAdd(b("b")), O::Int(1)),
                    (C::SAdd(b("a")), O::Int(1)),
                    (C::SAdd(b("a")), O::Int(0)),
                    (C::SMembers, items(&["a", "b"])),
                    (C::HGet(b("a")), O::WrongType),
                    (C::SRem(b("c")), O::Int(0)),
                    (C::Del, O::Int(1)),
                    (C::SMembers, items(&[])),
                ],
            ),
            (
                "zset",
                vec![
                    (C::ZIncrBy(3, b("m")), O::Bulk(Some(b("3")))),
                    (C::ZIncrBy(1, b("a")), O::Bulk(Some(b("1")))),
                    (C::ZIncrBy(-5, b("m")), O::Bulk(Some(b("-2")))),
                    (C::ZRange, items(&["m", "-2", "a", "1"])),
                    (C::ZRem(b("m")), O::Int(1)),
                    (C::SAdd(b("x")), O::WrongType),
                    (C::Set(b("v")), O::Ok),
                    (C::ZRange, O::WrongType),
                ],
            ),
            (
                "multi",
                vec![(
                    C::Multi(vec![C::RPush(b("a")), C::Get, C::LRange, C::Del]),
                    O::Exec(vec![O::Int(1), O::WrongType, items(&["a"]), O::Int(1)]),
                )],
            ),
        ];
        for (name, steps) in rows {
            let h: Vec<Op> = steps
                .iter()
                .enumerate()
                .map(|(i, (c, o))| {
                    ret(
                        1,
                        "k",
                        c.clone(),
                        (2 * i as u64, 2 * i as u64 + 1),
                        o.clone(),
                    )
                })
                .collect();
            let r = check(&TypedModel, &h, &CheckOptions::default()).expect(name);
            assert!(r.verdict.is_linearizable(), "{name}: {:?}", r.verdict);
            // Any one reply changed makes the sequential history wrong.
            for i in 0..h.len() {
                let mut bad = h.clone();
                bad[i] = ret(
                    1,
                    "k",
                    steps[i].0.clone(),
                    (2 * i as u64, 2 * i as u64 + 1),
                    O::Int(99),
                );
                let r = check(&TypedModel, &bad, &CheckOptions::default()).expect(name);
                assert!(!r.verdict.is_linearizable(), "{name}: reply {i} changed");
            }
        }
    }

    /// Concurrent histories: (name, history, linearizable).
    #[test]
    fn concurrent_histories() {
        let rows: Vec<(&str, Vec<Op>, bool)> = vec![
            (
                "overlapping pushes, either order",
                vec![
                    ret(1, "l", C::RPush(b("a")), (0, 10), O::Int(2)),
                    ret(2, "l", C::RPush(b("b")), (1, 9), O::Int(1)),
                    ret(3, "l", C::LRange, (11, 12), items(&["b", "a"])),
                ],
                true,
            ),
            (
                "a range that contradicts the push replies",
                vec![
                    ret(1, "l", C::RPush(b("a")), (0, 10), O::Int(2)),
                    ret(2, "l", C::RPush(b("b")), (1, 9), O::Int(1)),
                    ret(3, "l", C::LRange, (11, 12), items(&["a", "b"])),
                ],
                false,
            ),
            (
                "a pop sees an item twice",
                vec![
                    ret(1, "l", C::RPush(b("a")), (0, 1), O::Int(1)),
                    ret(2, "l", C::LPop, (2, 5), O::Bulk(Some(b("a")))),
                    ret(3, "l", C::LPop, (3, 6), O::Bulk(Some(b("a")))),
                ],
                false,
            ),
            (
                "stale set read after a completed add",
                vec![
                    ret(1, "s", C::SAdd(b("a")), (0, 1), O::Int(1)),
                    ret(2, "s", C::SMembers, (2, 3), items(&[])),
                ],
                false,
            ),
            (
                "unknown add may take effect later",
                vec![
                    Operation::unknown(1, TypedInput::new("s", C::SAdd(b("a"))), 0),
                    ret(2, "s", C::SMembers, (2, 3), items(&[])),
                    ret(2, "s", C::SMembers, (4, 5), items(&["a"])),
                ],
                true,
            ),
            (
                "a transaction seen half done",
                vec![
                    ret(
                        1,
                        "h",
                        C::Multi(vec![C::HSet(b("a"), b("1")), C::HSet(b("b"), b("1"))]),
                        (0, 10),
                        O::Exec(vec![O::Int(1), O::Int(1)]),
                    ),
                    ret(2, "h", C::HGetAll, (1, 9), items(&["a", "1"])),
                ],
                false,
            ),
            (
                "a transaction seen whole",
                vec![
                    ret(
                        1,
                        "h",
                        C::Multi(vec![C::HSet(b("a"), b("1")), C::HSet(b("b"), b("1"))]),
                        (0, 10),
                        O::Exec(vec![O::Int(1), O::Int(1)]),
                    ),
                    ret(2, "h", C::HGetAll, (1, 9), items(&["a", "1", "b", "1"])),
                ],
                true,
            ),
            (
                "concurrent increments lose one",
                vec![
                    ret(
                        1,
                        "z",
                        C::ZIncrBy(1, b("m")),
                        (0, 10),
                        O::Bulk(Some(b("1"))),
                    ),
                    ret(
                        2,
                        "z",
                        C::ZIncrBy(1, b("m")),
                        (0, 10),
                        O::Bulk(Some(b("1"))),
                    ),
                ],
                false,
            ),
            (
                "keys are independent",
                vec![
                    ret(1, "a", C::SAdd(b("x")), (0, 1), O::Int(1)),
                    ret(2, "b", C::SMembers, (2, 3), items(&[])),
                ],
                true,
            ),
        ];
        for (name, h, want) in rows {
            let r = check(&TypedModel, &h, &CheckOptions::default()).expect(name);
            assert_eq!(r.verdict.is_linearizable(), want, "{name}: {:?}", r.verdict);
        }
    }
}
