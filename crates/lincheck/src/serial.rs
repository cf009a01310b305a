//! A serializability check of multi-key transactions, in the style of
//! Elle's list-append workload (Kingsbury and Alvaro): every transaction
//! appends its own id to some keys (lists) and reads whole lists of
//! others. Since each value is appended once, a key's final list gives the
//! order of the writes to it, and every read names the prefix it saw. From
//! those come the dependencies between transactions:
//! - **ww**: consecutive appends to a key;
//! - **wr**: the last value a read saw → the reader;
//! - **rw** (anti-dependency): the reader → the append right after what
//!   it saw.
//!
//! The history is serializable only if that graph has no cycle. Besides
//! cycles the check finds reads that are not a prefix of the final list,
//! values appended twice or by no one, writes of transactions known to
//! have failed, lost writes of committed ones, and **fractured**
//! transactions: present on some of their keys and absent from others
//! (atomicity). A transaction that reads a key must not also append to it
//! (the check does not model reading one's own writes).

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What a client learned of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnOutcome {
    /// It committed; its reads are what it saw.
    Committed,
    /// It is known not to have run anywhere.
    Failed,
    /// No answer: it ran everywhere or nowhere; its reads are unknown.
    Unknown,
}

/// One transaction of the list-append workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// Its id: the value it appends (unique in the history).
    pub id: u64,
    /// The keys it appends its id to.
    pub appends: Vec<String>,
    /// The keys it read and the lists it saw (committed only).
    pub reads: Vec<(String, Vec<u64>)>,
    /// What its client learned.
    pub outcome: TxnOutcome,
    /// When its client sent it (any clock shared by the clients, ns).
    pub call: u64,
    /// When its client had the answer (committed only).
    pub ret: Option<u64>,
}

/// A violation found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anomaly {
    /// A read that is not a prefix of the key's final list.
    NotPrefix {
        /// The reader.
        txn: u64,
        /// The key.
        key: String,
    },
    /// A value twice in a final list.
    Duplicate {
        /// The key.
        key: String,
        /// The value.
        value: u64,
    },
    /// A value that no transaction appends to that key.
    Unknown {
        /// The key.
        key: String,
        /// The value.
        value: u64,
    },
    /// The write of a transaction known to have failed.
    FailedVisible {
        /// The transaction.
        txn: u64,
        /// Where it shows.
        key: String,
    },
    /// A committed transaction missing from a key it appended to.
    Lost {
        /// The transaction.
        txn: u64,
        /// The key.
        key: String,
    },
    /// Present on some of its keys, absent from others.
    Fractured {
        /// The transaction.
        txn: u64,
        /// A key that has it.
        present: String,
        /// A key that has not.
        absent: String,
    },
    /// A transaction that reads and appends the same key (not modelled).
    ReadsOwnKey {
        /// The transaction.
        txn: u64,
    },
    /// A cycle of dependencies: no serial order explains the history.
    Cycle(Vec<u64>),
}

/// What a clean check saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SerialSummary {
    /// Transactions in the history.
    pub txns: usize,
    /// Committed ones.
    pub committed: usize,
    /// Dependency edges.
    pub edges: usize,
}

/// Checks `txns` against `finals`, each key's list read once nothing runs
/// any more: serializable.
pub fn check_serializable(
    txns: &[Txn],
    finals: &BTreeMap<String, Vec<u64>>,
) -> Result<SerialSummary, Vec<Anomaly>> {
    check(txns, finals, false)
}

/// As [`check_serializable`], and the serial order must also follow real
/// time: a transaction that committed before another was sent comes
/// first (strict serializability). The real-time edges are those of the
/// frontier: each transaction gets one from every transaction that
/// committed before it was sent and was not followed by another such.
pub fn check_strict_serializable(
    txns: &[Txn],
    finals: &BTreeMap<String, Vec<u64>>,
) -> Result<SerialSummary, Vec<Anomaly>> {
    check(txns, finals, true)
}

/// Real-time edges: `(earlier, later)`.
fn realtime_edges(txns: &[Txn]) -> Vec<(u64, u64)> {
    // Calls before returns at the same instant: an answer at t does not
    // precede a call at t.
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * txns.len());
    for (i, t) in txns.iter().enumerate() {
        events.push((t.call, false, i));
        if let (Some(r), TxnOutcome::Committed) = (t.ret, t.outcome) {
            events.push((r, true, i));
        }
    }
    events.sort_unstable();
    let mut frontier: Vec<usize> = Vec::new();
    let mut edges = Vec::new();
    for (_, is_ret, i) in events {
        if is_ret {
            // Whoever returned before this one was called is implied.
            let call = txns[i].call;
            frontier.retain(|&j| txns[j].ret.is_some_and(|r| r >= call));
            frontier.push(i);
        } else {
            edges.extend(frontier.iter().map(|&j| (txns[j].id, txns[i].id)));
        }
    }
    edges
}

fn check(
    txns: &[Txn],
    finals: &BTreeMap<String, Vec<u64>>,
    realtime: bool,
) -> Result<SerialSummary, Vec<Anomaly>> {
    let mut bad = Vec::new();
    let by_id: HashMap<u64, &Txn> = txns.iter().map(|t| (t.id, t)).collect();
    let empty = Vec::new();
    let final_of = |k: &str| finals.get(k).unwrap_or(&empty);
    // The values, each where it must be.
    for (key, list) in finals {
        let mut seen = BTreeSet::new();
        for &v in list {
            if !seen.insert(v) {
                bad.push(Anomaly::Duplicate {
                    key: key.clone(),
                    value: v,
                });
            }
            match by_id.get(&v) {
                Some(t) if t.appends.contains(key) => {
                    if t.outcome == TxnOutcome::Failed {
                        bad.push(Anomaly::FailedVisible {
                            txn: v,
                            key: key.clone(),
                        });
                    }
                }
                _ => bad.push(Anomaly::Unknown {
                    key: key.clone(),
                    value: v,
                }),
            }
        }
    }
    // Atomicity, lost writes, reads.
    for t in txns {
        if t.reads.iter().any(|(k, _)| t.appends.contains(k)) {
            bad.push(Anomaly::ReadsOwnKey { txn: t.id });
        }
        let (has, hasnt): (Vec<&String>, Vec<&String>) =
            t.appends.iter().partition(|k| final_of(k).contains(&t.id));
        if let (Some(p), Some(a)) = (has.first(), hasnt.first()) {
            bad.push(Anomaly::Fractured {
                txn: t.id,
                present: (*p).clone(),
                absent: (*a).clone(),
            });
        } else if t.outcome == TxnOutcome::Committed {
            for k in hasnt {
                bad.push(Anomaly::Lost {
                    txn: t.id,
                    key: k.clone(),
                });
            }
        }
        if t.outcome != TxnOutcome::Committed {
            continue;
        }
        for (k, seen) in &t.reads {
            let f = final_of(k);
            if seen.len() > f.len() || f[..seen.len()] != seen[..] {
                bad.push(Anomaly::NotPrefix {
                    txn: t.id,
                    key: k.clone(),
                });
            }
        }
    }
    if !bad.is_empty() {
        return Err(bad);
    }
    // The dependency graph.
    let mut edges: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut add = |a: u64, b: u64| {
        if a != b {
            edges.entry(a).or_default().insert(b);
        }
    };
    for list in finals.values() {
        for w in list.windows(2) {
            add(w[0], w[1]);
        }
    }
    for t in txns.iter().filter(|t| t.outcome == TxnOutcome::Committed) {
        for (k, seen) in &t.reads {
            if let Some(&last) = seen.last() {
                add(last, t.id);
            }
            if let Some(&next) = final_of(k).get(seen.len()) {
                add(t.id, next);
            }
        }
    }
    if realtime {
        for (a, b) in realtime_edges(txns) {
            add(a, b);
        }
    }
    let n_edges = edges.values().map(|s| s.len()).sum();
    if let Some(c) = find_cycle(&edges) {
        return Err(vec![Anomaly::Cycle(c)]);
    }
    Ok(SerialSummary {
        txns: txns.len(),
        committed: txns
            .iter()
            .filter(|t| t.outcome == TxnOutcome::Committed)
            .count(),
        edges: n_edges,
    })
}

/// A cycle in `g`, if any (iterative depth-first search, three colours).
fn find_cycle(g: &BTreeMap<u64, BTreeSet<u64>>) -> Option<Vec<u64>> {
    #[derive(Clone, Copy, PartialEq)]
    enum C {
        Grey,
        Black,
    }
    let mut colour: HashMap<u64, C> = HashMap::new();
    let none = BTreeSet::new();
    for &root in g.keys() {
        if colour.contains_key(&root) {
            continue;
        }
        // The path, each node with its successors still to visit.
        let mut path: Vec<(u64, Vec<u64>)> = vec![(root, g[&root].iter().copied().collect())];
        colour.insert(root, C::Grey);
        while let Some((node, todo)) = path.last_mut() {
            let node = *node;
            match todo.pop() {
                Some(next) => match colour.get(&next) {
                    Some(C::Grey) => {
                        let from = path.iter().position(|(n, _)| *n == next).unwrap_or(0);
                        return Some(path[from..].iter().map(|(n, _)| *n).collect());
                    }
                    Some(C::Black) => {}
                    None => {
                        colour.insert(next, C::Grey);
                        let succ = g.get(&next).unwrap_or(&none).iter().copied().collect();
                        path.push((next, succ));
                    }
                },
                None => {
                    colour.insert(node, C::Black);
                    path.pop();
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transaction sent at `id * 10` and answered 5 later: the ids
    /// follow real time, one after another.
    fn t(id: u64, appends: &[&str], reads: &[(&str, &[u64])], outcome: TxnOutcome) -> Txn {
        Txn {
            id,
            appends: appends.iter().map(|s| s.to_string()).collect(),
            reads: reads
                .iter()
                .map(|(k, l)| (k.to_string(), l.to_vec()))
                .collect(),
            outcome,
            call: id * 10,
            ret: (outcome == TxnOutcome::Committed).then_some(id * 10 + 5),
        }
    }

    fn finals(kv: &[(&str, &[u64])]) -> BTreeMap<String, Vec<u64>> {
        kv.iter()
            .map(|(k, l)| (k.to_string(), l.to_vec()))
            .collect()
    }

    use TxnOutcome::{Committed as C, Failed as F, Unknown as U};

    #[test]
    fn histories_table() {
        type Case = (
            &'static str,
            Vec<Txn>,
            Vec<(&'static str, &'static [u64])>,
            Option<Anomaly>,
        );
        let cases: Vec<Case> = vec![
            (
                "serial",
                vec![
                    t(1, &["x", "y"], &[], C),
                    t(2, &["x"], &[("y", &[1])], C),
                    t(3, &[], &[("x", &[1, 2]), ("y", &[1])], C),
                ],
                vec![("x", &[1, 2]), ("y", &[1])],
                None,
            ),
            (
                "an unknown transaction, absent everywhere",
                vec![t(1, &["x", "y"], &[], U), t(2, &[], &[("x", &[])], C)],
                vec![("x", &[]), ("y", &[])],
                None,
            ),
            (
                "write skew (G2)",
                vec![
                    t(1, &["y"], &[("x", &[])], C),
                    t(2, &["x"], &[("y", &[])], C),
                ],
                vec![("x", &[2]), ("y", &[1])],
                Some(Anomaly::Cycle(vec![1, 2])),
            ),
            (
                "fractured",
                vec![t(1, &["x", "y"], &[], U)],
                vec![("x", &[1]), ("y", &[])],
                Some(Anomaly::Fractured {
                    txn: 1,
                    present: "x".into(),
                    absent: "y".into(),
                }),
            ),
            (
                "lost",
                vec![t(1, &["x"], &[], C)],
                vec![("x", &[])],
                Some(Anomaly::Lost {
                    txn: 1,
                    key: "x".into(),
                }),
            ),
            (
                "failed but visible",
                vec![t(1, &["x"], &[], F)],
                vec![("x", &[1])],
                Some(Anomaly::FailedVisible {
                    txn: 1,
                    key: "x".into(),
                }),
            ),
            (
                "not a prefix",
                vec![
                    t(1, &["x"], &[], C),
                    t(2, &["x"], &[], C),
                    t(3, &[], &[("x", &[2])], C),
                ],
                vec![("x", &[1, 2])],
                Some(Anomaly::NotPrefix {
                    txn: 3,
                    key: "x".into(),
                }),
            ),
            (
                "appended by no one",
                vec![],
                vec![("x", &[9])],
                Some(Anomaly::Unknown {
                    key: "x".into(),
                    value: 9,
                }),
            ),
            (
                "order seen differently on two keys",
                vec![t(1, &["x", "y"], &[], C), t(2, &["x", "y"], &[], C)],
                vec![("x", &[1, 2]), ("y", &[2, 1])],
                Some(Anomaly::Cycle(vec![1, 2])),
            ),
        ];
        for (name, txns, fin, want) in cases {
            // These histories are sequential in real time, and the ones
            // that are serializable are so in that order.
            let strict = check_strict_serializable(&txns, &finals(&fin));
            assert_eq!(strict.is_ok(), want.is_none(), "{name}: strict {strict:?}");
            let got = check_serializable(&txns, &finals(&fin));
            match want {
                None => assert!(got.is_ok(), "{name}: {got:?}"),
                Some(Anomaly::Cycle(_)) => {
                    let errs = got.expect_err(name);
                    assert!(
                        matches!(errs[..], [Anomaly::Cycle(ref c)] if c.len() == 2),
                        "{name}: {errs:?}"
                    );
                }
                Some(a) => assert!(got.expect_err(name).contains(&a), "{name}"),
            }
        }
    }

    #[test]
    fn real_time_order_table() {
        // (name, transactions, finals, serializable, strictly)
        type Case = (
            &'static str,
            Vec<Txn>,
            Vec<(&'static str, &'static [u64])>,
            bool,
            bool,
        );
        let at = |mut x: Txn, call: u64, ret: Option<u64>| {
            x.call = call;
            x.ret = ret;
            x
        };
        let cases: Vec<Case> = vec![
            (
                // 2 was sent after 1 committed, yet did not see it.
                "stale read",
                vec![
                    at(t(1, &["x"], &[], C), 0, Some(10)),
                    at(t(2, &[], &[("x", &[])], C), 20, Some(30)),
                ],
                vec![("x", &[1])],
                true,
                false,
            ),
            (
                "overlapping: either order",
                vec![
                    at(t(1, &["x"], &[], C), 0, Some(30)),
                    at(t(2, &[], &[("x", &[])], C), 10, Some(20)),
                ],
                vec![("x", &[1])],
                true,
                true,
            ),
            (
                // Implied through a third: 1 before 3 before 2.
                "transitive",
                vec![
                    at(t(1, &["x"], &[], C), 0, Some(10)),
                    at(t(3, &["y"], &[], C), 20, Some(30)),
                    at(t(2, &[], &[("x", &[])], C), 40, Some(50)),
                ],
                vec![("x", &[1]), ("y", &[3])],
                true,
                false,
            ),
            (
                "an unknown outcome orders nothing after it",
                vec![
                    at(t(1, &["x"], &[], U), 0, None),
                    at(t(2, &[], &[("x", &[])], C), 20, Some(30)),
                ],
                vec![("x", &[1])],
                true,
                true,
            ),
        ];
        for (name, txns, fin, ser, strict) in cases {
            let f = finals(&fin);
            assert_eq!(check_serializable(&txns, &f).is_ok(), ser, "{name}");
            assert_eq!(
                check_strict_serializable(&txns, &f).is_ok(),
                strict,
                "{name}"
            );
        }
    }
}
