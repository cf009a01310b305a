//! `XINFO`: the stream, group and consumer reports and the command that
//! builds them.

use super::command::{help_reply, subcommand, Key, XINFO_HELP};
use super::entry::{entries_reply, entry_reply, Entry};
use super::error::{arg, ctext, int, is, nogroup_for_key, StreamError};
use super::group::{Group, ENTRIES_READ_INVALID};
use super::id::StreamId;
use super::log::{ms, Stream};
use crate::resp::Reply;

pub(super) fn field(name: &str, v: Reply) -> (Reply, Reply) {
    (Reply::bulk(name.as_bytes().to_vec()), v)
}

pub(super) fn int_reply(v: u64) -> Reply {
    Reply::Integer(i64::try_from(v).unwrap_or(i64::MAX))
}

pub(super) fn opt_int(v: Option<i64>) -> Reply {
    v.map_or_else(Reply::nil, Reply::Integer)
}

/// `XINFO STREAM key` (a map of 10 fields, in this order: `length`,
/// `radix-tree-keys`, `radix-tree-nodes`, `last-generated-id`,
/// `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`,
/// `groups`, `first-entry`, `last-entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfo {
    /// `length`: integer.
    pub length: u64,
    /// `radix-tree-keys`: integer.
    pub radix_tree_keys: u64,
    /// `radix-tree-nodes`: integer.
    pub radix_tree_nodes: u64,
    /// `last-generated-id`: bulk ID.
    pub last_generated_id: StreamId,
    /// `max-deleted-entry-id`: bulk ID.
    pub max_deleted_entry_id: StreamId,
    /// `entries-added`: integer.
    pub entries_added: u64,
    /// `recorded-first-entry-id`: bulk ID.
    pub recorded_first_entry_id: StreamId,
    /// `groups`: integer.
    pub groups: u64,
    /// `first-entry`: `[id, [f, v, ...]]` or nil.
    pub first_entry: Option<Entry>,
    /// `last-entry`: `[id, [f, v, ...]]` or nil.
    pub last_entry: Option<Entry>,
}

/// The field names of `XINFO STREAM`, in Redis's order.
pub const XINFO_STREAM_FIELDS: [&str; 10] = [
    "length",
    "radix-tree-keys",
    "radix-tree-nodes",
    "last-generated-id",
    "max-deleted-entry-id",
    "entries-added",
    "recorded-first-entry-id",
    "groups",
    "first-entry",
    "last-entry",
];

/// The field names of `XINFO STREAM FULL`, in Redis's order.
pub const XINFO_STREAM_FULL_FIELDS: [&str; 9] = [
    "length",
    "radix-tree-keys",
    "radix-tree-nodes",
    "last-generated-id",
    "max-deleted-entry-id",
    "entries-added",
    "recorded-first-entry-id",
    "entries",
    "groups",
];

/// The field names of a group in `XINFO STREAM FULL`.
pub const XINFO_FULL_GROUP_FIELDS: [&str; 7] = [
    "name",
    "last-delivered-id",
    "entries-read",
    "lag",
    "pel-count",
    "pending",
    "consumers",
];

/// The field names of a consumer in `XINFO STREAM FULL` (7.0: no
/// `active-time`).
pub const XINFO_FULL_CONSUMER_FIELDS: [&str; 4] = ["name", "seen-time", "pel-count", "pending"];

/// The field names of `XINFO GROUPS`' maps.
pub const XINFO_GROUPS_FIELDS: [&str; 6] = [
    "name",
    "consumers",
    "pending",
    "last-delivered-id",
    "entries-read",
    "lag",
];

/// The field names of `XINFO CONSUMERS`' maps (7.0: no `inactive`).
pub const XINFO_CONSUMERS_FIELDS: [&str; 3] = ["name", "pending", "idle"];

impl StreamInfo {
    /// The RESP reply (a map; RESP2 writes it flat).
    pub fn to_reply(&self) -> Reply {
        let e = |x: &Option<Entry>| match x {
            Some((id, f)) => entry_reply(*id, f),
            None => Reply::nil(),
        };
        let v = vec![
            int_reply(self.length),
            int_reply(self.radix_tree_keys),
            int_reply(self.radix_tree_nodes),
            self.last_generated_id.to_reply(),
            self.max_deleted_entry_id.to_reply(),
            int_reply(self.entries_added),
            self.recorded_first_entry_id.to_reply(),
            int_reply(self.groups),
            e(&self.first_entry),
            e(&self.last_entry),
        ];
        Reply::Map(
            XINFO_STREAM_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

/// A pending entry in `XINFO STREAM FULL`'s group:
/// `[id, consumer, delivery-time, delivery-count]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullGroupPending {
    /// The entry.
    pub id: StreamId,
    /// Its consumer.
    pub consumer: Vec<u8>,
    /// Last delivery (ms, Unix time).
    pub delivery_time: i64,
    /// Deliveries.
    pub delivery_count: u64,
}

/// A consumer in `XINFO STREAM FULL` (map: `name`, `seen-time`,
/// `pel-count`, `pending` = `[[id, delivery-time, delivery-count], ...]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullConsumer {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `seen-time`: integer (ms, Unix time).
    pub seen_time: i64,
    /// `pel-count`: integer.
    pub pel_count: u64,
    /// `pending`: at most COUNT of `(id, delivery-time, delivery-count)`.
    pub pending: Vec<(StreamId, i64, u64)>,
}

/// A group in `XINFO STREAM FULL` (map: `name`, `last-delivered-id`,
/// `entries-read` (integer or nil), `lag` (integer or nil), `pel-count`,
/// `pending`, `consumers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullGroup {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `last-delivered-id`: bulk ID.
    pub last_delivered_id: StreamId,
    /// `entries-read`: integer, or nil when unknown.
    pub entries_read: Option<i64>,
    /// `lag`: integer, or nil when it cannot be known.
    pub lag: Option<i64>,
    /// `pel-count`: integer.
    pub pel_count: u64,
    /// `pending`: at most COUNT entries of the group PEL.
    pub pending: Vec<FullGroupPending>,
    /// `consumers`: every consumer.
    pub consumers: Vec<FullConsumer>,
}

/// `XINFO STREAM key FULL [COUNT n]` (a map of 9 fields:
/// [`XINFO_STREAM_FULL_FIELDS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInfoFull {
    /// `length`.
    pub length: u64,
    /// `radix-tree-keys`.
    pub radix_tree_keys: u64,
    /// `radix-tree-nodes`.
    pub radix_tree_nodes: u64,
    /// `last-generated-id`.
    pub last_generated_id: StreamId,
    /// `max-deleted-entry-id`.
    pub max_deleted_entry_id: StreamId,
    /// `entries-added`.
    pub entries_added: u64,
    /// `recorded-first-entry-id`.
    pub recorded_first_entry_id: StreamId,
    /// `entries`: the first COUNT entries.
    pub entries: Vec<Entry>,
    /// `groups`: every group.
    pub groups: Vec<FullGroup>,
}

impl StreamInfoFull {
    /// The RESP reply (maps; RESP2 writes them flat).
    pub fn to_reply(&self) -> Reply {
        let groups = self
            .groups
            .iter()
            .map(|g| {
                let pending = g
                    .pending
                    .iter()
                    .map(|p| {
                        Reply::Array(Some(vec![
                            p.id.to_reply(),
                            Reply::bulk(p.consumer.clone()),
                            Reply::Integer(p.delivery_time),
                            int_reply(p.delivery_count),
                        ]))
                    })
                    .collect();
                let consumers = g
                    .consumers
                    .iter()
                    .map(|c| {
                        let pending = c
                            .pending
                            .iter()
                            .map(|(id, t, n)| {
                                Reply::Array(Some(vec![
                                    id.to_reply(),
                                    Reply::Integer(*t),
                                    int_reply(*n),
                                ]))
                            })
                            .collect();
                        let v = vec![
                            Reply::bulk(c.name.clone()),
                            Reply::Integer(c.seen_time),
                            int_reply(c.pel_count),
                            Reply::Array(Some(pending)),
                        ];
                        Reply::Map(
                            XINFO_FULL_CONSUMER_FIELDS
                                .iter()
                                .zip(v)
                                .map(|(n, v)| field(n, v))
                                .collect(),
                        )
                    })
                    .collect();
                let v = vec![
                    Reply::bulk(g.name.clone()),
                    g.last_delivered_id.to_reply(),
                    opt_int(g.entries_read),
                    opt_int(g.lag),
                    int_reply(g.pel_count),
                    Reply::Array(Some(pending)),
                    Reply::Array(Some(consumers)),
                ];
                Reply::Map(
                    XINFO_FULL_GROUP_FIELDS
                        .iter()
                        .zip(v)
                        .map(|(n, v)| field(n, v))
                        .collect(),
                )
            })
            .collect();
        let v = vec![
            int_reply(self.length),
            int_reply(self.radix_tree_keys),
            int_reply(self.radix_tree_nodes),
            self.last_generated_id.to_reply(),
            self.max_deleted_entry_id.to_reply(),
            int_reply(self.entries_added),
            self.recorded_first_entry_id.to_reply(),
            entries_reply(&self.entries),
            Reply::Array(Some(groups)),
        ];
        Reply::Map(
            XINFO_STREAM_FULL_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

/// One group of `XINFO GROUPS` (map: [`XINFO_GROUPS_FIELDS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `consumers`: integer.
    pub consumers: u64,
    /// `pending`: integer.
    pub pending: u64,
    /// `last-delivered-id`: bulk ID.
    pub last_delivered_id: StreamId,
    /// `entries-read`: integer or nil.
    pub entries_read: Option<i64>,
    /// `lag`: integer or nil.
    pub lag: Option<i64>,
}

impl GroupInfo {
    /// The RESP reply of one group (a map).
    pub fn to_reply(&self) -> Reply {
        let v = vec![
            Reply::bulk(self.name.clone()),
            int_reply(self.consumers),
            int_reply(self.pending),
            self.last_delivered_id.to_reply(),
            opt_int(self.entries_read),
            opt_int(self.lag),
        ];
        Reply::Map(
            XINFO_GROUPS_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

/// One consumer of `XINFO CONSUMERS` (map: [`XINFO_CONSUMERS_FIELDS`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerInfo {
    /// `name`: bulk.
    pub name: Vec<u8>,
    /// `pending`: integer.
    pub pending: u64,
    /// `idle`: integer, ms since its seen-time (at least 0).
    pub idle: i64,
}

impl ConsumerInfo {
    /// The RESP reply of one consumer (a map).
    pub fn to_reply(&self) -> Reply {
        let v = vec![
            Reply::bulk(self.name.clone()),
            int_reply(self.pending),
            Reply::Integer(self.idle),
        ];
        Reply::Map(
            XINFO_CONSUMERS_FIELDS
                .iter()
                .zip(v)
                .map(|(n, v)| field(n, v))
                .collect(),
        )
    }
}

pub(super) fn entries_read(g: &Group) -> Option<i64> {
    (g.entries_read != ENTRIES_READ_INVALID).then_some(g.entries_read)
}

impl Stream {
    /// `XINFO STREAM key`.
    pub fn info(&self) -> StreamInfo {
        StreamInfo {
            length: self.len(),
            radix_tree_keys: self.radix_tree_keys(),
            radix_tree_nodes: self.radix_tree_nodes(),
            last_generated_id: self.last_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
            recorded_first_entry_id: self.first_id,
            groups: self.groups.len() as u64,
            first_entry: self.range(StreamId::MIN, StreamId::MAX, 1, false).pop(),
            last_entry: self.range(StreamId::MIN, StreamId::MAX, 1, true).pop(),
        }
    }

    /// `XINFO STREAM key FULL [COUNT count]`: `count` entries, and as many
    /// pending entries per group and per consumer (0: all).
    pub fn info_full(&self, count: usize) -> StreamInfoFull {
        let take = if count == 0 { usize::MAX } else { count };
        let groups = self
            .groups
            .iter()
            .map(|(name, g)| FullGroup {
                name: name.clone(),
                last_delivered_id: g.last_id,
                entries_read: entries_read(g),
                lag: self.lag(g),
                pel_count: g.pel.len() as u64,
                pending: g
                    .pel
                    .iter()
                    .take(take)
                    .map(|(id, n)| FullGroupPending {
                        id: *id,
                        consumer: n.consumer.clone(),
                        delivery_time: n.delivery_time,
                        delivery_count: n.delivery_count,
                    })
                    .collect(),
                consumers: g
                    .consumers
                    .iter()
                    .map(|(cname, c)| FullConsumer {
                        name: cname.clone(),
                        seen_time: c.seen_time,
                        pel_count: c.pel.len() as u64,
                        pending: c
                            .pel
                            .iter()
                            .take(take)
                            .map(|id| {
                                let (t, n) = g
                                    .pel
                                    .get(id)
                                    .map_or((0, 0), |n| (n.delivery_time, n.delivery_count));
                                (*id, t, n)
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect();
        StreamInfoFull {
            length: self.len(),
            radix_tree_keys: self.radix_tree_keys(),
            radix_tree_nodes: self.radix_tree_nodes(),
            last_generated_id: self.last_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
            recorded_first_entry_id: self.first_id,
            entries: self.range(StreamId::MIN, StreamId::MAX, count, false),
            groups,
        }
    }

    /// `XINFO GROUPS key`.
    pub fn info_groups(&self) -> Vec<GroupInfo> {
        self.groups
            .iter()
            .map(|(name, g)| GroupInfo {
                name: name.clone(),
                consumers: g.consumers.len() as u64,
                pending: g.pel.len() as u64,
                last_delivered_id: g.last_id,
                entries_read: entries_read(g),
                lag: self.lag(g),
            })
            .collect()
    }

    /// `XINFO CONSUMERS key group` (`None` without the group); idle times
    /// from `now_ms`.
    pub fn info_consumers(&self, group: &[u8], now_ms: u64) -> Option<Vec<ConsumerInfo>> {
        let g = self.groups.get(group)?;
        let now = ms(now_ms);
        Some(
            g.consumers
                .iter()
                .map(|(name, c)| ConsumerInfo {
                    name: name.clone(),
                    pending: c.pel.len() as u64,
                    idle: now.wrapping_sub(c.seen_time).max(0),
                })
                .collect(),
        )
    }
}

/// `XINFO ...`, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Xinfo {
    /// `XINFO HELP`.
    Help,
    /// `XINFO STREAM key [FULL [COUNT n]]` (the option words, which Redis
    /// checks after the key).
    Stream {
        /// The key.
        key: Vec<u8>,
        /// The words after the key.
        options: Vec<Vec<u8>>,
        /// The subcommand as given (for the syntax error).
        sub: Vec<u8>,
    },
    /// `XINFO GROUPS key`.
    Groups {
        /// The key.
        key: Vec<u8>,
    },
    /// `XINFO CONSUMERS key group`.
    Consumers {
        /// The key.
        key: Vec<u8>,
        /// The group.
        group: Vec<u8>,
    },
}

impl Xinfo {
    /// Parses XINFO's words (the dispatcher's checks).
    pub fn parse(args: &[Vec<u8>]) -> Result<Xinfo, StreamError> {
        let sub = subcommand(
            args,
            "xinfo",
            "XINFO",
            &[
                ("stream", -3, "xinfo|stream"),
                ("groups", 3, "xinfo|groups"),
                ("consumers", 4, "xinfo|consumers"),
                ("help", 2, "xinfo|help"),
            ],
        )?;
        let key = arg(args, 2).to_vec();
        Ok(match sub {
            "help" => Xinfo::Help,
            "stream" => Xinfo::Stream {
                key,
                options: args.get(3..).unwrap_or(&[]).to_vec(),
                sub: arg(args, 1).to_vec(),
            },
            "groups" => Xinfo::Groups { key },
            _ => Xinfo::Consumers {
                key,
                group: arg(args, 3).to_vec(),
            },
        })
    }

    /// The key it names (`None` for HELP).
    pub fn key(&self) -> Option<&[u8]> {
        match self {
            Xinfo::Help => None,
            Xinfo::Stream { key, .. } | Xinfo::Groups { key } | Xinfo::Consumers { key, .. } => {
                Some(key)
            }
        }
    }
}

/// What XINFO replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XinfoReply {
    /// HELP's lines.
    Help(Vec<&'static str>),
    /// `XINFO STREAM key`.
    Stream(StreamInfo),
    /// `XINFO STREAM key FULL`.
    Full(StreamInfoFull),
    /// `XINFO GROUPS key`: an array of maps.
    Groups(Vec<GroupInfo>),
    /// `XINFO CONSUMERS key group`: an array of maps.
    Consumers(Vec<ConsumerInfo>),
}

impl XinfoReply {
    /// The RESP reply.
    pub fn to_reply(&self) -> Reply {
        match self {
            XinfoReply::Help(lines) => help_reply(lines),
            XinfoReply::Stream(i) => i.to_reply(),
            XinfoReply::Full(i) => i.to_reply(),
            XinfoReply::Groups(g) => {
                Reply::Array(Some(g.iter().map(GroupInfo::to_reply).collect()))
            }
            XinfoReply::Consumers(c) => {
                Reply::Array(Some(c.iter().map(ConsumerInfo::to_reply).collect()))
            }
        }
    }
}

/// Runs XINFO at `now_ms` (CONSUMERS' idle times).
pub fn xinfo(key: Key<'_>, a: &Xinfo, now_ms: u64) -> Result<XinfoReply, StreamError> {
    if *a == Xinfo::Help {
        return Ok(XinfoReply::Help(XINFO_HELP.to_vec()));
    }
    let s = match key {
        Key::WrongType => return Err(StreamError::WrongType),
        Key::Missing => return Err(StreamError::NoSuchKey),
        Key::Stream(s) => s,
    };
    match a {
        Xinfo::Help => Ok(XinfoReply::Help(XINFO_HELP.to_vec())),
        Xinfo::Groups { .. } => Ok(XinfoReply::Groups(s.info_groups())),
        Xinfo::Consumers { key, group } => s
            .info_consumers(group, now_ms)
            .map(XinfoReply::Consumers)
            .ok_or_else(|| nogroup_for_key(key, group)),
        Xinfo::Stream { options, sub, .. } => {
            let syntax = || StreamError::SubcommandSyntax {
                sub: ctext(sub, 128),
                cmd: "XINFO",
            };
            match options.len() {
                0 => Ok(XinfoReply::Stream(s.info())),
                1 | 3 => {
                    if !is(&options[0], "full") {
                        return Err(syntax());
                    }
                    let mut count = 10;
                    if options.len() == 3 {
                        if !is(&options[1], "count") {
                            return Err(syntax());
                        }
                        count = int(&options[2])?;
                        if count < 0 {
                            count = 10;
                        }
                    }
                    Ok(XinfoReply::Full(
                        s.info_full(usize::try_from(count).unwrap_or(usize::MAX)),
                    ))
                }
                _ => Err(syntax()),
            }
        }
    }
}
