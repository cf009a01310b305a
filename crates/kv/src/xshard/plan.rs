//! Splitting a request (one command, or the commands of a `MULTI`/`EXEC`)
//! into one part per shard, and putting the shards' replies back together
//! as the one reply the client expects.
//!
//! A command whose keys all live on one shard goes to that shard as it is.
//! `MSET`, `MGET`, `DEL`, `UNLINK`, `EXISTS` and `TOUCH` are split into
//! one single-key command per key (their replies are joined back: `OK`,
//! the array of values, the sum). Any other command whose keys span
//! shards is refused with `CROSSSLOT`, as Redis Cluster does; so are
//! commands that name no key, and those that make no sense inside an
//! ordered transaction (`WATCH`, nested `MULTI`, pub/sub, blocking).

use super::shard_of;
use crate::cmd::table::CommandSpec;
use crate::dispatch::all_commands;
use crate::resp::{Command, Reply};
use std::collections::BTreeMap;

/// Why a request was refused before it was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Not a command this server knows.
    #[error("ERR unknown command '{0}'")]
    Unknown(String),
    /// The wrong number of words.
    #[error("ERR wrong number of arguments for '{0}' command")]
    Arity(String),
    /// Keys on more than one shard, in a command that cannot be split.
    #[error("CROSSSLOT Keys in request don't hash to the same shard ('{0}' cannot be split)")]
    CrossSlot(String),
    /// A command without a key, or one refused inside a transaction.
    #[error("ERR '{0}' is not served by the transaction proxy: {1}")]
    NotServed(String, &'static str),
}

/// How the replies of a command's pieces become its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Join {
    /// One piece: its reply.
    One,
    /// `MSET`: `OK`, or the first error.
    AllOk,
    /// `MGET`: the array of the pieces' replies.
    Array,
    /// `DEL`, `UNLINK`, `EXISTS`, `TOUCH`: the sum, or the first error.
    Sum,
}

/// One command of the request: how to join its pieces, and where each
/// piece sits (shard, index in that shard's part).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    join: Join,
    pieces: Vec<(u32, usize)>,
}

/// A request split by shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Each shard's commands, in request order.
    pub shards: BTreeMap<u32, Vec<Command>>,
    parts: Vec<Part>,
    exec: bool,
}

fn spec_of(name: &[u8]) -> Option<&'static CommandSpec> {
    all_commands().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

const REFUSED: &[&str] = &[
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "subscribe",
    "psubscribe",
    "unsubscribe",
    "punsubscribe",
    "publish",
];

/// The keys of `args` (see [`crate::cmd::keys_of`]).
fn keys_of(args: &[Vec<u8>]) -> Vec<&[u8]> {
    crate::cmd::keys_of(args)
        .unwrap_or_default()
        .into_iter()
        .map(|i| args[i].as_slice())
        .collect()
}

impl Plan {
    /// Splits `cmds` over `shards` shards: one command (`exec` false), or
    /// the commands queued between `MULTI` and `EXEC`.
    pub fn new(cmds: &[Command], shards: u32, exec: bool) -> Result<Plan, PlanError> {
        let mut plan = Plan {
            shards: BTreeMap::new(),
            parts: Vec::with_capacity(cmds.len()),
            exec,
        };
        for c in cmds {
            plan.add(c, shards.max(1))?;
        }
        Ok(plan)
    }

    /// Checks one command as `MULTI` would queue it (known, arity, served).
    pub fn check(cmd: &Command) -> Result<(), PlanError> {
        Self::spec_checked(cmd).map(|_| ())
    }

    fn spec_checked(cmd: &Command) -> Result<&'static CommandSpec, PlanError> {
        let name = String::from_utf8_lossy(cmd.first().map_or(&[][..], |n| n)).to_lowercase();
        let spec = spec_of(name.as_bytes()).ok_or_else(|| PlanError::Unknown(name.clone()))?;
        let n = cmd.len();
        if !spec.arity_ok(n) {
            return Err(PlanError::Arity(name));
        }
        if REFUSED.contains(&spec.name) {
            return Err(PlanError::NotServed(
                name,
                "not inside an ordered transaction",
            ));
        }
        if spec.first_key() <= 0 {
            return Err(PlanError::NotServed(
                name,
                "it names no key; send it to a shard",
            ));
        }
        if spec.name == "mset" && n % 2 == 0 {
            return Err(PlanError::Arity(name));
        }
        Ok(spec)
    }

    fn piece(&mut self, shard: u32, cmd: Command) -> (u32, usize) {
        let list = self.shards.entry(shard).or_default();
        list.push(cmd);
        (shard, list.len() - 1)
    }

    fn add(&mut self, cmd: &Command, shards: u32) -> Result<(), PlanError> {
        let spec = Self::spec_checked(cmd)?;
        let keys = keys_of(cmd);
        let first = shard_of(keys[0], shards);
        if keys.iter().all(|k| shard_of(k, shards) == first) {
            let p = self.piece(first, cmd.clone());
            self.parts.push(Part {
                join: Join::One,
                pieces: vec![p],
            });
            return Ok(());
        }
        let name = spec.name;
        let join = match name {
            "mset" => Join::AllOk,
            "mget" => Join::Array,
            "del" | "unlink" | "exists" | "touch" => Join::Sum,
            _ => return Err(PlanError::CrossSlot(name.to_string())),
        };
        let single = match name {
            "mset" => "set",
            "mget" => "get",
            other => other,
        };
        let step = if name == "mset" { 2 } else { 1 };
        let mut pieces = Vec::new();
        for w in cmd[1..].chunks(step) {
            let mut one = vec![single.as_bytes().to_vec()];
            one.extend(w.iter().cloned());
            pieces.push(self.piece(shard_of(&w[0], shards), one));
        }
        self.parts.push(Part { join, pieces });
        Ok(())
    }

    /// The request's reply from the shards' replies: each an array with
    /// one reply per command of its part, or one error for all of them. A
    /// shard missing from `replies` answers with `missing`.
    pub fn assemble(&self, replies: &BTreeMap<u32, Reply>, missing: &Reply) -> Reply {
        let piece = |(shard, i): (u32, usize)| -> Reply {
            match replies.get(&shard) {
                Some(Reply::Array(Some(items))) => items
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| Reply::err("ERR shard reply too short")),
                Some(e @ Reply::Error(_)) => e.clone(),
                Some(_) => Reply::err("ERR unexpected shard reply"),
                None => missing.clone(),
            }
        };
        let parts: Vec<Reply> = self
            .parts
            .iter()
            .map(|p| {
                let rs: Vec<Reply> = p.pieces.iter().map(|&x| piece(x)).collect();
                let first_err = rs.iter().find(|r| r.is_error()).cloned();
                match p.join {
                    Join::One => rs.into_iter().next().unwrap_or_else(Reply::nil),
                    Join::Array => Reply::Array(Some(rs)),
                    Join::AllOk => first_err.unwrap_or_else(Reply::ok),
                    Join::Sum => first_err.unwrap_or_else(|| {
                        Reply::Integer(
                            rs.iter()
                                .map(|r| match r {
                                    Reply::Integer(n) => *n,
                                    _ => 0,
                                })
                                .sum(),
                        )
                    }),
                }
            })
            .collect();
        match self.exec {
            true => Reply::Array(Some(parts)),
            false => parts.into_iter().next().unwrap_or_else(Reply::nil),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(s: &str) -> Command {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    /// Two keys on different shards of two (found, not assumed).
    fn two_shard_keys() -> (String, String) {
        let a = "k0".to_string();
        let b = (1..100)
            .map(|i| format!("k{i}"))
            .find(|k| shard_of(k.as_bytes(), 2) != shard_of(a.as_bytes(), 2))
            .expect("a key on the other shard");
        (a, b)
    }

    #[test]
    fn refusals_table() {
        let (a, b) = two_shard_keys();
        let cases = [
            ("NOPE x", PlanError::Unknown("nope".into())),
            ("GET", PlanError::Arity("get".into())),
            (
                &format!("MSET {a} 1 {b}") as &str,
                PlanError::Arity("mset".into()),
            ),
            (
                &format!("RENAME {a} {b}"),
                PlanError::CrossSlot("rename".into()),
            ),
            (
                "DBSIZE",
                PlanError::NotServed("dbsize".into(), "it names no key; send it to a shard"),
            ),
            (
                "WATCH x",
                PlanError::NotServed("watch".into(), "not inside an ordered transaction"),
            ),
        ];
        for (c, want) in cases {
            assert_eq!(Plan::new(&[cmd(c)], 2, false), Err(want), "{c}");
        }
    }

    #[test]
    fn splits_and_joins() {
        let (a, b) = two_shard_keys();
        let (sa, sb) = (shard_of(a.as_bytes(), 2), shard_of(b.as_bytes(), 2));
        let p = Plan::new(
            &[
                cmd(&format!("MSET {a} 1 {b} 2")),
                cmd(&format!("MGET {b} {a}")),
                cmd(&format!("DEL {a} {b}")),
                cmd(&format!("INCR {a}")),
            ],
            2,
            true,
        )
        .unwrap();
        assert_eq!(
            p.shards[&sa],
            vec![
                cmd(&format!("set {a} 1")),
                cmd(&format!("get {a}")),
                cmd(&format!("del {a}")),
                cmd(&format!("INCR {a}"))
            ]
        );
        assert_eq!(p.shards[&sb].len(), 3);
        let replies = BTreeMap::from([
            (
                sa,
                Reply::Array(Some(vec![
                    Reply::ok(),
                    Reply::bulk("1"),
                    Reply::Integer(1),
                    Reply::Integer(2),
                ])),
            ),
            (
                sb,
                Reply::Array(Some(vec![Reply::ok(), Reply::bulk("2"), Reply::Integer(1)])),
            ),
        ]);
        assert_eq!(
            p.assemble(&replies, &Reply::err("ERR lost")),
            Reply::Array(Some(vec![
                Reply::ok(),
                Reply::Array(Some(vec![Reply::bulk("2"), Reply::bulk("1")])),
                Reply::Integer(2),
                Reply::Integer(2),
            ]))
        );
        // A shard's error answers for each of its pieces.
        let half = BTreeMap::from([(sa, Reply::err("ERR down"))]);
        let one = Plan::new(&[cmd(&format!("MSET {a} 1 {b} 2"))], 2, false).unwrap();
        assert_eq!(
            one.assemble(&half, &Reply::err("ERR lost")),
            Reply::err("ERR down")
        );
    }
}
