//! Scripts and functions: `EVAL`, `EVALSHA`, `FCALL` (and their `_RO`
//! forms), `SCRIPT` and `FUNCTION`, in Lua 5.1 as Redis embeds it.
//!
//! **How a script is replicated.** A script is one op ([`WriteCmd::Eval`]):
//! the leader checks its words and logs the script itself (body, SHA1 or
//! function name, `KEYS`, `ARGV`) with the leader's clock and a random
//! seed. Every member runs it as it applies that op, against its store at
//! that place in the log. A script is therefore atomic on every member (no
//! other op applies while it runs) and its reads see every write before it
//! in the log, on any member, across leader changes. What a script could
//! draw from its member instead of the op is taken away:
//!
//! - the time (`TIME`, expiries) is the op's;
//! - `math.random` and the random picks of the commands it calls (`SPOP`,
//!   `SRANDMEMBER`, ...) draw from the op's seed;
//! - globals are read-only and the engine's compiled-code cache holds no
//!   state of the script's own ([`engine`]);
//! - the budget that stops a runaway script counts Lua instructions, not
//!   seconds: every member stops it at the same instruction, and its writes
//!   are undone on every member ([`engine::Outcome::OverBudget`]).
//!
//! The script cache (bodies by SHA1) and the function libraries are part
//! of the replicated state and of snapshots ([`state::Scripts`]): an
//! `EVALSHA` finds on every member what the log put there, also after a
//! leader change.
//!
//! What remains outside: a script that turns the address of a table into
//! data (`tostring({})`, `pairs` over a table keyed by tables) may differ
//! between members, as addresses do; `collectgarbage`, `gcinfo`,
//! `getfenv`/`setfenv`, `load` and `newproxy` are not given to scripts.

pub mod admin;
pub mod convert;
pub mod engine;
pub mod libs;
pub mod state;

pub use admin::{eval_op, read, script_cmd, ScriptAction};
pub use state::{Flags, Library, Scripts};

#[cfg(doc)]
use crate::op::WriteCmd;

/// Lua VM instructions a script may run before it is stopped (and its
/// writes undone), unless `lua-instruction-limit` says otherwise: about a
/// second of a busy loop on one core of today's machines.
pub const DEFAULT_BUDGET: u64 = 200_000_000;
