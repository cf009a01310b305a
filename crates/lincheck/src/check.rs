//! The decision procedure: Wing & Gong's search with Lowe's memoization, run separately
//! on each partition of the history (P-compositionality, as in Porcupine).

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::hash::Hash;

use crate::history::{Operation, Outcome};

/// A sequential specification of the object under test.
///
/// The model must be deterministic: from a state, an input and an observed output there
/// is at most one next state.
pub trait Model {
    /// Partition key: operations with different keys must be independent (commute and not
    /// observe each other), e.g. the key of a key-value operation.
    type Key: Clone + Ord + fmt::Debug;
    /// State of one partition.
    type State: Clone + Eq + Hash + fmt::Debug;
    /// An operation's input.
    type Input: Clone + fmt::Debug;
    /// An operation's output.
    type Output: Clone + fmt::Debug;

    /// The partition `input` belongs to.
    fn partition(&self, input: &Self::Input) -> Self::Key;

    /// The initial state of every partition.
    fn init(&self) -> Self::State;

    /// Applies `input` to `state`. With `Some(output)`, returns the next state if the
    /// specification allows that output, else `None`. With `None` (unknown outcome),
    /// returns the next state for whatever output the specification would produce.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Option<Self::State>;
}

/// An operation of model `M`'s history.
pub type ModelOp<M> = Operation<<M as Model>::Input, <M as Model>::Output>;

/// The report [`check`] gives for model `M`.
pub type ModelReport<M> = CheckReport<<M as Model>::Key, <M as Model>::Input, <M as Model>::Output>;

/// Limits on the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOptions {
    /// Give up on a partition (verdict [`Verdict::Unknown`]) after this many model steps.
    pub max_steps_per_partition: u64,
    /// Search for the shortest failing prefix when a partition is not linearizable (costs
    /// about `log2(ops)` extra searches of that partition).
    pub minimize: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            max_steps_per_partition: 2_000_000,
            minimize: true,
        }
    }
}

/// Why a history could not be checked at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HistoryError {
    /// An operation returns before it is invoked.
    #[error("operation #{index} returns at {at} before its call at {call}")]
    ReturnBeforeCall {
        /// Position in the history.
        index: usize,
        /// Invocation time.
        call: u64,
        /// Response time.
        at: u64,
    },
}

/// Evidence that one partition is not linearizable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation<K, I, O> {
    /// The partition.
    pub key: K,
    /// The partition's operations invoked up to `culprit`'s response, sorted by call
    /// time; operations that returned later are shown as unknown. This prefix is not
    /// linearizable, and (when [`CheckOptions::minimize`] is set) no shorter prefix cut
    /// at an earlier response is.
    pub prefix: Vec<Operation<I, O>>,
    /// The completed operation whose response makes the prefix non-linearizable.
    pub culprit: Operation<I, O>,
    /// The longest partial linearization the search found for `prefix`, in order.
    pub longest_linearization: Vec<Operation<I, O>>,
}

/// The checker's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<K, I, O> {
    /// Every partition has a linearization.
    Linearizable,
    /// Some partition has none (the first such key is reported).
    NotLinearizable(Box<Violation<K, I, O>>),
    /// No violation found, but the search of `key` hit
    /// [`CheckOptions::max_steps_per_partition`]: not proven either way.
    Unknown {
        /// The partition that was given up on.
        key: K,
        /// Model steps spent on it.
        steps: u64,
    },
}

impl<K, I, O> Verdict<K, I, O> {
    /// True for [`Verdict::Linearizable`].
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Verdict::Linearizable)
    }
}

/// Result of [`check`]: the verdict plus search statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport<K, I, O> {
    /// The verdict.
    pub verdict: Verdict<K, I, O>,
    /// Operations in the history.
    pub ops: usize,
    /// Of which with unknown outcome.
    pub unknown_ops: usize,
    /// Number of partitions (keys).
    pub partitions: usize,
    /// Total model steps over all partitions (including minimization).
    pub steps: u64,
    /// Largest number of memoized configurations in one search.
    pub max_cache: usize,
}

/// Checks `history` against `model`.
///
/// Each partition is searched with the Wing–Gong–Lowe algorithm: walk the time-ordered
/// call/return events, tentatively linearize a pending call whose model step accepts the
/// observed output, backtrack when the return of a not-yet-linearized operation is
/// reached, and prune configurations (set of linearized operations, model state) seen
/// before. Unknown-outcome operations have no return event, so they may be linearized
/// anywhere after their call or left out.
pub fn check<M: Model>(
    model: &M,
    history: &[ModelOp<M>],
    opts: &CheckOptions,
) -> Result<ModelReport<M>, HistoryError> {
    for (index, op) in history.iter().enumerate() {
        if let Some(at) = op.returned_at() {
            if at < op.call {
                return Err(HistoryError::ReturnBeforeCall {
                    index,
                    call: op.call,
                    at,
                });
            }
        }
    }
    let mut parts: BTreeMap<M::Key, Vec<&ModelOp<M>>> = BTreeMap::new();
    for op in history {
        parts
            .entry(model.partition(&op.input))
            .or_default()
            .push(op);
    }
    let mut report = CheckReport {
        verdict: Verdict::Linearizable,
        ops: history.len(),
        unknown_ops: history.iter().filter(|o| o.output().is_none()).count(),
        partitions: parts.len(),
        steps: 0,
        max_cache: 0,
    };
    let mut unknown = None;
    for (key, ops) in parts {
        let owned: Vec<ModelOp<M>> = ops.into_iter().cloned().collect();
        let run = search(model, &owned, opts.max_steps_per_partition);
        report.steps += run.steps;
        report.max_cache = report.max_cache.max(run.cache);
        match run.result {
            SearchResult::Ok => {}
            SearchResult::GaveUp => {
                if unknown.is_none() {
                    unknown = Some(Verdict::Unknown {
                        key,
                        steps: run.steps,
                    });
                }
            }
            SearchResult::Fail => {
                let v = explain(model, key, &owned, opts, &mut report.steps);
                report.verdict = Verdict::NotLinearizable(Box::new(v));
                return Ok(report);
            }
        }
    }
    if let Some(u) = unknown {
        report.verdict = u;
    }
    Ok(report)
}

/// Finds the shortest failing prefix (cut at a response) by binary search: cutting at a
/// later response only adds constraints, so failure is monotone in the cut.
fn explain<M: Model>(
    model: &M,
    key: M::Key,
    ops: &[Operation<M::Input, M::Output>],
    opts: &CheckOptions,
    steps: &mut u64,
) -> Violation<M::Key, M::Input, M::Output> {
    let mut rets: Vec<(u64, usize)> = ops
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.returned_at().map(|t| (t, i)))
        .collect();
    rets.sort_unstable();
    // Invariant: cut at rets[hi] fails (the full history, cut at its last response, does:
    // later calls are all unknown-outcome and cannot constrain anything).
    let (mut lo, mut hi) = (0usize, rets.len().saturating_sub(1));
    if opts.minimize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let run = search(model, &cut(ops, rets[mid].0), opts.max_steps_per_partition);
            *steps += run.steps;
            if run.result == SearchResult::Fail {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
    }
    let (t, culprit) = rets.get(hi).copied().unwrap_or((u64::MAX, 0));
    let prefix = cut(ops, t);
    let run = search(model, &prefix, opts.max_steps_per_partition);
    *steps += run.steps;
    let longest = run.longest.iter().map(|&i| prefix[i].clone()).collect();
    Violation {
        key,
        culprit: ops[culprit].clone(),
        prefix,
        longest_linearization: longest,
    }
}

/// Operations invoked at or before `t`; those returning after `t` become unknown.
fn cut<I: Clone, O: Clone>(ops: &[Operation<I, O>], t: u64) -> Vec<Operation<I, O>> {
    let mut out: Vec<Operation<I, O>> = ops
        .iter()
        .filter(|o| o.call <= t)
        .map(|o| match o.returned_at() {
            Some(at) if at > t => Operation::unknown(o.client, o.input.clone(), o.call),
            _ => o.clone(),
        })
        .collect();
    out.sort_by_key(|o| o.call);
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SearchResult {
    Ok,
    Fail,
    GaveUp,
}

struct Run {
    result: SearchResult,
    steps: u64,
    cache: usize,
    longest: Vec<usize>,
}

struct Event {
    op: usize,
    is_call: bool,
}

const NIL: usize = usize::MAX;

/// The WGL search over one partition. Events form a doubly linked list (indices; the
/// head sentinel is `events.len()`), from which a linearized call and its return are
/// unlinked and relinked on backtracking.
fn search<M: Model>(model: &M, ops: &[Operation<M::Input, M::Output>], max_steps: u64) -> Run {
    let mut order: Vec<(u64, u8, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, o) in ops.iter().enumerate() {
        order.push((o.call, 0, i));
        if let Some(at) = o.returned_at() {
            order.push((at, 1, i));
        }
    }
    order.sort_unstable();
    let events: Vec<Event> = order
        .iter()
        .map(|&(_, kind, op)| Event {
            op,
            is_call: kind == 0,
        })
        .collect();
    let n = events.len();
    let head = n;
    let mut next: Vec<usize> = (1..=n).map(|i| if i == n { NIL } else { i }).collect();
    next.push(if n == 0 { NIL } else { 0 });
    let mut prev: Vec<usize> = (0..n).map(|i| if i == 0 { head } else { i - 1 }).collect();
    prev.push(NIL);
    let mut ret_of = vec![NIL; ops.len()];
    for (e, ev) in events.iter().enumerate() {
        if !ev.is_call {
            ret_of[ev.op] = e;
        }
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        next[prev[x]] = next[x];
        if next[x] != NIL {
            prev[next[x]] = prev[x];
        }
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        next[prev[x]] = x;
        if next[x] != NIL {
            prev[next[x]] = x;
        }
    };

    let completed = ops.iter().filter(|o| o.output().is_some()).count();
    let mut done = 0usize;
    let mut bits = vec![0u64; ops.len().div_ceil(64)];
    let mut cache: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut steps = 0u64;
    let mut longest: Vec<usize> = Vec::new();
    let mut entry = next[head];
    let finish = |result, steps, cache: &HashSet<_>, longest| Run {
        result,
        steps,
        cache: cache.len(),
        longest,
    };
    loop {
        if done == completed {
            return finish(SearchResult::Ok, steps, &cache, longest);
        }
        let backtrack = entry == NIL || !events[entry].is_call;
        if !backtrack {
            let op = events[entry].op;
            steps += 1;
            if steps > max_steps {
                return finish(SearchResult::GaveUp, steps, &cache, longest);
            }
            if let Some(ns) = model.step(&state, &ops[op].input, ops[op].output()) {
                bits[op / 64] |= 1 << (op % 64);
                if cache.insert((bits.clone(), ns.clone())) {
                    stack.push((entry, std::mem::replace(&mut state, ns)));
                    if ops[op].output().is_some() {
                        done += 1;
                    }
                    unlink(&mut next, &mut prev, entry);
                    if ret_of[op] != NIL {
                        unlink(&mut next, &mut prev, ret_of[op]);
                    }
                    if stack.len() > longest.len() {
                        longest = stack.iter().map(|(e, _)| events[*e].op).collect();
                    }
                    entry = next[head];
                    continue;
                }
                bits[op / 64] &= !(1 << (op % 64));
            }
            entry = next[entry];
            continue;
        }
        let Some((call, s)) = stack.pop() else {
            return finish(SearchResult::Fail, steps, &cache, longest);
        };
        state = s;
        let op = events[call].op;
        bits[op / 64] &= !(1 << (op % 64));
        if ops[op].output().is_some() {
            done -= 1;
        }
        if ret_of[op] != NIL {
            relink(&mut next, &mut prev, ret_of[op]);
        }
        relink(&mut next, &mut prev, call);
        entry = next[call];
    }
}

impl<K: fmt::Debug, I: fmt::Debug, O: fmt::Debug> fmt::Display for Violation<K, I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "partition {:?} is not linearizable: {} ops up to the response of {}",
            self.key,
            self.prefix.len(),
            show(&self.culprit)
        )?;
        let skip = self.prefix.len().saturating_sub(20);
        if skip > 0 {
            writeln!(f, "  ... {skip} earlier ops")?;
        }
        for op in &self.prefix[skip..] {
            writeln!(f, "  {}", show(op))?;
        }
        let lin = &self.longest_linearization;
        let skip = lin.len().saturating_sub(10);
        writeln!(
            f,
            "longest partial linearization ({} ops), last ones:",
            lin.len()
        )?;
        for op in &lin[skip..] {
            writeln!(f, "  {}", show(op))?;
        }
        Ok(())
    }
}

fn show<I: fmt::Debug, O: fmt::Debug>(op: &Operation<I, O>) -> String {
    match &op.outcome {
        Outcome::Returned { at, output } => format!(
            "[{}..{}] client {}: {:?} -> {:?}",
            op.call, at, op.client, op.input, output
        ),
        Outcome::Unknown => format!(
            "[{}..?] client {}: {:?} -> unknown",
            op.call, op.client, op.input
        ),
    }
}

impl<K: fmt::Debug, I: fmt::Debug, O: fmt::Debug> fmt::Display for Verdict<K, I, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Linearizable => write!(f, "linearizable"),
            Verdict::NotLinearizable(v) => write!(f, "NOT linearizable: {v}"),
            Verdict::Unknown { key, steps } => write!(
                f,
                "unknown: gave up on partition {key:?} after {steps} steps"
            ),
        }
    }
}
