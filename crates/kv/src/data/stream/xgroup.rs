//! `XGROUP` (its subcommands) and `XSETID`.

use super::command::{
    help_reply, outcome, subcommand, subcommand_syntax, touched, KeyMut, Outcome, XGROUP_HELP,
};
use super::error::{arg, arity, int, is, is_exact, msg, nogroup_for_key, StreamError};
use super::group::ENTRIES_READ_INVALID;
use super::id::StreamId;
use super::log::Stream;
use crate::resp::Reply;

/// `XGROUP ...`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Xgroup {
    /// `XGROUP HELP`.
    Help,
    /// `XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n]`.
    Create {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The ID word (checked after the key).
        id: Vec<u8>,
        /// MKSTREAM.
        mkstream: bool,
        /// ENTRIESREAD ([`ENTRIES_READ_INVALID`] when not given).
        entries_read: i64,
        /// Too many words: the error Redis gives after the key checks.
        late_error: Option<StreamError>,
    },
    /// `XGROUP SETID key group id|$ [ENTRIESREAD n]`.
    SetId {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The ID word (checked after the key; `-`/`+` allowed).
        id: Vec<u8>,
        /// ENTRIESREAD ([`ENTRIES_READ_INVALID`] when not given).
        entries_read: i64,
        /// Wrong number of words: the error Redis gives after the key
        /// checks.
        late_error: Option<StreamError>,
    },
    /// `XGROUP DESTROY key group`.
    Destroy {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
    },
    /// `XGROUP CREATECONSUMER key group consumer`.
    CreateConsumer {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The consumer.
        consumer: Vec<u8>,
    },
    /// `XGROUP DELCONSUMER key group consumer`.
    DelConsumer {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
        /// The consumer.
        consumer: Vec<u8>,
    },
}

/// What XGROUP replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XgroupReply {
    /// `+OK` (CREATE, SETID).
    Ok,
    /// An integer (DESTROY: 0/1, CREATECONSUMER: 0/1, DELCONSUMER: the
    /// pending count).
    Int(i64),
    /// HELP's lines (status replies).
    Help(Vec<&'static str>),
}

impl XgroupReply {
    /// The RESP reply.
    pub fn to_reply(&self) -> Reply {
        match self {
            XgroupReply::Ok => Reply::ok(),
            XgroupReply::Int(n) => Reply::Integer(*n),
            XgroupReply::Help(lines) => help_reply(lines),
        }
    }
}

impl Xgroup {
    /// Parses XGROUP's words: the dispatcher's checks, then the options of
    /// CREATE/SETID (errors Redis gives before looking the key up).
    pub fn parse(args: &[Vec<u8>]) -> Result<Xgroup, StreamError> {
        let sub = subcommand(
            args,
            "xgroup",
            "XGROUP",
            &[
                ("create", -5, "xgroup|create"),
                ("setid", -5, "xgroup|setid"),
                ("destroy", 4, "xgroup|destroy"),
                ("createconsumer", 5, "xgroup|createconsumer"),
                ("delconsumer", 5, "xgroup|delconsumer"),
                ("help", 2, "xgroup|help"),
            ],
        )?;
        let n = args.len();
        let mut mkstream = false;
        let mut entries_read = ENTRIES_READ_INVALID;
        if n >= 4 {
            let create = sub == "create";
            let setid = sub == "setid";
            let mut i = 5;
            while i < n {
                if create && is(arg(args, i), "MKSTREAM") {
                    mkstream = true;
                    i += 1;
                } else if (create || setid) && is(arg(args, i), "ENTRIESREAD") && i + 1 < n {
                    entries_read = int(arg(args, i + 1))?;
                    if entries_read < 0 && entries_read != ENTRIES_READ_INVALID {
                        return Err(StreamError::Msg(msg::ENTRIESREAD_NEGATIVE));
                    }
                    i += 2;
                } else {
                    return Err(subcommand_syntax(args, "XGROUP"));
                }
            }
        }
        let key = arg(args, 2).to_vec();
        let group = arg(args, 3).to_vec();
        Ok(match sub {
            "help" => Xgroup::Help,
            "create" => Xgroup::Create {
                key,
                group,
                id: arg(args, 4).to_vec(),
                mkstream,
                entries_read,
                late_error: (!(5..=8).contains(&n)).then(|| subcommand_syntax(args, "XGROUP")),
            },
            "setid" => Xgroup::SetId {
                key,
                group,
                id: arg(args, 4).to_vec(),
                entries_read,
                late_error: (n != 5 && n != 7).then(|| subcommand_syntax(args, "XGROUP")),
            },
            "destroy" => Xgroup::Destroy { key, group },
            "createconsumer" => Xgroup::CreateConsumer {
                key,
                group,
                consumer: arg(args, 4).to_vec(),
            },
            _ => Xgroup::DelConsumer {
                key,
                group,
                consumer: arg(args, 4).to_vec(),
            },
        })
    }

    /// The key it names (`None` for HELP).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Xgroup::Help => None,
            Xgroup::Create { key, .. }
            | Xgroup::SetId { key, .. }
            | Xgroup::Destroy { key, .. }
            | Xgroup::CreateConsumer { key, .. }
            | Xgroup::DelConsumer { key, .. } => Some(key),
        }
    }
}

/// Runs XGROUP (HELP needs no key: pass any `key`). Events:
/// `xgroup-create`, `xgroup-setid`, `xgroup-destroy`,
/// `xgroup-createconsumer`, `xgroup-delconsumer` when they did something.
pub fn xgroup(
    key: KeyMut<'_>,
    a: &Xgroup,
    now_ms: u64,
) -> Result<Outcome<XgroupReply>, StreamError> {
    let (name, group, mkstream) = match a {
        Xgroup::Help => return Ok(outcome(XgroupReply::Help(XGROUP_HELP.to_vec()), vec![])),
        Xgroup::Create {
            key,
            group,
            mkstream,
            ..
        } => (key, group, *mkstream),
        Xgroup::SetId { key, group, .. }
        | Xgroup::Destroy { key, group }
        | Xgroup::CreateConsumer { key, group, .. }
        | Xgroup::DelConsumer { key, group, .. } => (key, group, false),
    };
    let KeyMut::Slot(slot) = key else {
        return Err(StreamError::WrongType);
    };
    if !mkstream {
        let Some(s) = slot.as_ref() else {
            return Err(StreamError::Msg(msg::XGROUP_NEEDS_KEY));
        };
        let needs_group = matches!(
            a,
            Xgroup::SetId { .. } | Xgroup::CreateConsumer { .. } | Xgroup::DelConsumer { .. }
        );
        if needs_group && s.group(group).is_none() {
            return Err(nogroup_for_key(name, group));
        }
    }
    match a {
        Xgroup::Help => Ok(outcome(XgroupReply::Help(XGROUP_HELP.to_vec()), vec![])),
        Xgroup::Create {
            id,
            entries_read,
            late_error,
            ..
        } => {
            if let Some(e) = late_error {
                return Err(e.clone());
            }
            let last = if is_exact(id, "$") {
                slot.as_ref().map_or(StreamId::MIN, |s| s.last_id())
            } else {
                StreamId::parse_strict(id, 0)?
            };
            let created = slot.is_none();
            let s = slot.get_or_insert_with(Stream::new);
            if s.create_group(group, last, *entries_read) {
                Ok(touched(XgroupReply::Ok, vec!["xgroup-create"], created))
            } else {
                Err(StreamError::Msg(msg::BUSYGROUP))
            }
        }
        Xgroup::SetId {
            id,
            entries_read,
            late_error,
            ..
        } => {
            if let Some(e) = late_error {
                return Err(e.clone());
            }
            let Some(s) = slot.as_mut() else {
                return Err(StreamError::Msg(msg::XGROUP_NEEDS_KEY));
            };
            let last = if is_exact(id, "$") {
                s.last_id()
            } else {
                StreamId::parse(id, 0)?
            };
            s.set_group_id(group, last, *entries_read);
            Ok(outcome(XgroupReply::Ok, vec!["xgroup-setid"]))
        }
        Xgroup::Destroy { .. } => {
            let done = slot.as_mut().is_some_and(|s| s.destroy_group(group));
            Ok(outcome(
                XgroupReply::Int(i64::from(done)),
                if done { vec!["xgroup-destroy"] } else { vec![] },
            ))
        }
        Xgroup::CreateConsumer { consumer, .. } => {
            let created = slot
                .as_mut()
                .and_then(|s| s.create_consumer(group, consumer, now_ms))
                .unwrap_or(false);
            Ok(outcome(
                XgroupReply::Int(i64::from(created)),
                if created {
                    vec!["xgroup-createconsumer"]
                } else {
                    vec![]
                },
            ))
        }
        Xgroup::DelConsumer { consumer, .. } => {
            let s = slot.as_mut();
            let existed = s
                .as_ref()
                .and_then(|s| s.group(group))
                .is_some_and(|g| g.consumers.contains_key(consumer.as_slice()));
            let pending = s
                .and_then(|s| s.delete_consumer(group, consumer))
                .unwrap_or(0);
            Ok(outcome(
                XgroupReply::Int(pending as i64),
                if existed {
                    vec!["xgroup-delconsumer"]
                } else {
                    vec![]
                },
            ))
        }
    }
}

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Xsetid {
    /// The new last ID.
    pub id: StreamId,
    /// ENTRIESADDED.
    pub entries_added: Option<u64>,
    /// MAXDELETEDID.
    pub max_deleted: Option<StreamId>,
}

impl Xsetid {
    /// Parses XSETID's words.
    pub fn parse(args: &[Vec<u8>]) -> Result<Xsetid, StreamError> {
        arity(args, -3, "xsetid")?;
        let id = StreamId::parse_strict(arg(args, 2), 0)?;
        let mut r = Xsetid {
            id,
            entries_added: None,
            max_deleted: None,
        };
        let n = args.len();
        let mut i = 3;
        while i < n {
            let more = n - 1 - i;
            let o = arg(args, i);
            if is(o, "ENTRIESADDED") && more > 0 {
                let v = int(arg(args, i + 1))?;
                if v < 0 {
                    return Err(StreamError::Msg(msg::ENTRIES_ADDED_NEGATIVE));
                }
                r.entries_added = Some(v as u64);
                i += 2;
            } else if is(o, "MAXDELETEDID") && more > 0 {
                let m = StreamId::parse_strict(arg(args, i + 1), 0)?;
                if id < m {
                    return Err(StreamError::Msg(msg::XSETID_BELOW_MAXDELETED));
                }
                r.max_deleted = Some(m);
                i += 2;
            } else {
                return Err(StreamError::Syntax);
            }
        }
        Ok(r)
    }
}

/// Runs XSETID (`+OK`). Event: `xsetid`.
pub fn xsetid(key: KeyMut<'_>, a: &Xsetid) -> Result<Outcome<()>, StreamError> {
    match key {
        KeyMut::WrongType => Err(StreamError::WrongType),
        KeyMut::Slot(slot) => match slot.as_mut() {
            None => Err(StreamError::NoSuchKey),
            Some(s) => {
                s.set_id(a.id, a.entries_added, a.max_deleted)?;
                Ok(outcome((), vec!["xsetid"]))
            }
        },
    }
}
