//! [`Run`]: what every command module's parsed command does against the
//! store.

use crate::resp::Reply;
use crate::store::Store;
use crate::value::SplitMix;

/// What every module's parsed command does. A module implements what it
/// needs; the defaults answer "nothing special".
pub(crate) trait Run {
    /// Runs it as a write at the op's logical instant `now` (a read given
    /// here is answered at `now` too).
    fn apply(&self, st: &mut Store, now: u64, rng: &mut SplitMix) -> Reply;
    /// Answers it as a read at `now`.
    fn read(&self, st: &Store, now: u64, rng: &mut SplitMix) -> Reply;
    /// Its reply when running it as a write would change nothing (see
    /// `crate::cmd::unchanged_reply`); `None` when it might.
    fn unchanged(&self, _st: &Store) -> Option<Reply> {
        None
    }
    /// Whether it may change the store although the table does not flag
    /// it `write` (`PFCOUNT` refreshing a cached count).
    fn writes(&self) -> bool {
        false
    }
    /// Whether it changes nothing with these arguments although the table
    /// flags it `write` (`GEORADIUS` without `STORE`): it is then checked
    /// and answered as a read, never logged. The table's flags stay what
    /// `COMMAND` and ACL categories report.
    fn reads_only(&self) -> bool {
        false
    }
}
