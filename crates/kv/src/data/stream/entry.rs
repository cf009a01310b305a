//! Entries (an ID and its fields), the stream's node-size settings, and
//! the RESP replies that carry entries.

use super::id::StreamId;
use crate::resp::Reply;
use std::sync::Arc;

/// The field/value pairs of one entry, shared (a clone is O(1)).
pub type Fields = Arc<Vec<(Vec<u8>, Vec<u8>)>>;

/// One entry as replies carry it.
pub type Entry = (StreamId, Fields);

/// One entry of an XREADGROUP reply: `None` for a pending entry no longer
/// in the stream.
pub type GroupEntry = (StreamId, Option<Fields>);

/// One stream of an XREAD reply: its key and entries.
pub type KeyEntries = (Vec<u8>, Vec<Entry>);

/// The server settings that shape a stream's nodes: Redis's
/// `stream-node-max-entries` and `stream-node-max-bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// Entries (live and deleted) per node before a new one starts; 0: no
    /// limit. Also sets approximate trimming's default LIMIT (100 times
    /// this). Redis's default: 100.
    pub node_max_entries: i64,
    /// A node's listpack bytes before a new one starts; 0: 1 GiB. Redis's
    /// default: 4096.
    pub node_max_bytes: u64,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            node_max_entries: 100,
            node_max_bytes: 4096,
        }
    }
}

/// One entry as Redis replies it: `[id, [field, value, ...]]`.
pub fn entry_reply(id: StreamId, fields: &Fields) -> Reply {
    let mut fv = Vec::with_capacity(fields.len() * 2);
    for (f, v) in fields.iter() {
        fv.push(Reply::bulk(f.clone()));
        fv.push(Reply::bulk(v.clone()));
    }
    Reply::Array(Some(vec![id.to_reply(), Reply::Array(Some(fv))]))
}

/// Entries as XRANGE replies them: `[[id, [f, v, ...]], ...]`.
pub fn entries_reply(entries: &[Entry]) -> Reply {
    Reply::Array(Some(
        entries.iter().map(|(id, f)| entry_reply(*id, f)).collect(),
    ))
}

/// XREADGROUP's entries for one stream: as [`entries_reply`], with
/// `[id, nil-array]` for a pending entry no longer in the stream.
pub fn group_entries_reply(entries: &[GroupEntry]) -> Reply {
    Reply::Array(Some(
        entries
            .iter()
            .map(|(id, f)| match f {
                Some(f) => entry_reply(*id, f),
                None => Reply::Array(Some(vec![id.to_reply(), Reply::Array(None)])),
            })
            .collect(),
    ))
}

/// XREAD's (and XREADGROUP's) RESP2 reply from each served stream's name
/// and entries reply: `[[key, entries], ...]`, or the nil array when no
/// stream was served. (RESP3: Redis sends a map key → entries instead.)
pub fn xread_reply(streams: Vec<(Vec<u8>, Reply)>) -> Reply {
    if streams.is_empty() {
        return Reply::Array(None);
    }
    Reply::Array(Some(
        streams
            .into_iter()
            .map(|(k, e)| Reply::Array(Some(vec![Reply::bulk(k), e])))
            .collect(),
    ))
}
