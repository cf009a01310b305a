//! `xlane-lincheck`: a linearizability checker for recorded concurrent histories, in the
//! style of Porcupine (Athalye) and Knossos (Kingsbury).
//!
//! * [`history`]: [`Operation`]s with call/response times, unknown outcomes
//!   ([`Outcome::Unknown`]: timed out or crashed — may take effect at any time after the
//!   call, or never), and a [`HistoryRecorder`] for tests.
//! * [`check()`]: the Wing–Gong–Lowe search (depth-first over time-ordered call/return
//!   events with backtracking, memoizing (linearized-set bitset, model state)), run per
//!   partition of a [`Model`] (P-compositionality: per key for a key-value store). The
//!   search is bounded per partition; past the bound the verdict is
//!   [`Verdict::Unknown`], never a silent pass. Failures come with the shortest failing
//!   prefix and the longest partial linearization found.
//! * [`kv`]: [`KvModel`], a Redis-semantics register map (get/put/incr/delete).
//! * [`typed`]: [`TypedModel`], strings, hashes, lists, sets and sorted sets per key,
//!   with `MULTI`/`EXEC` on one key.
//! * [`serial`]: [`check_serializable`] and [`check_strict_serializable`],
//!   checks of multi-key transactions (list-append, as Elle): dependency
//!   cycles (with real-time edges for the strict one), fractured
//!   (non-atomic) transactions, lost and impossible writes.
//!
//! ```
//! use xlane_lincheck::{check, CheckOptions, KvInput, KvModel, KvOutput, Operation};
//! // A put that completed before a get began must be seen by it.
//! let h = vec![
//!     Operation::returned(1, KvInput::put("k", "1"), 0, KvOutput::Ok, 10),
//!     Operation::returned(2, KvInput::get("k"), 20, KvOutput::Value(None), 30),
//! ];
//! let r = check(&KvModel, &h, &CheckOptions::default()).unwrap();
//! assert!(!r.verdict.is_linearizable());
//! ```
#![warn(missing_docs)]

pub mod check;
pub mod history;
pub mod kv;
pub mod serial;
pub mod typed;

pub use check::{
    check, CheckOptions, CheckReport, HistoryError, Model, ModelOp, ModelReport, Verdict, Violation,
};
pub use history::{HistoryRecorder, OpHandle, Operation, Outcome, RecordError};
pub use kv::{KvCall, KvInput, KvModel, KvOutput};
pub use serial::{
    check_serializable, check_strict_serializable, Anomaly, SerialSummary, Txn, TxnOutcome,
};
pub use typed::{TypedCall, TypedInput, TypedModel, TypedOutput, TypedValue};

#[cfg(test)]
mod tests;
