//! DUMP / RESTORE support: the listpack nodes as Redis lays them out, and
//! rebuilding a stream from a payload.

use super::entry::Fields;
use super::error::StreamError;
use super::group::Group;
use super::id::StreamId;
use super::listpack::{entry_bytes, master_bytes, same_fields, Ent, Node};
use super::log::Stream;
use imbl::Vector;
use std::sync::Arc;

/// One listpack node of a stream as Redis lays it out, for a DUMP/RDB
/// writer ([`Stream::nodes`]): an entry's fields are stored as values
/// only (flag SAMEFIELDS) when its field names are the master entry's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// The node's key in the radix tree: its first entry's ID.
    pub master_id: StreamId,
    /// The master entry's field names.
    pub master_fields: Arc<Vec<Vec<u8>>>,
    /// Its entries in listpack order, deleted ones (flagged, still in the
    /// listpack) included: `(id, fields, deleted)`. Live entries ascend;
    /// a deleted one may be above later ones (see [`Stream::nodes`]).
    pub entries: Vec<(StreamId, Fields, bool)>,
    /// The listpack's size in bytes, as Redis's.
    pub lp_bytes: u64,
}

/// An entry as a payload gives it: ID, field/value pairs, deleted flag.
pub type RestoredEntry = (StreamId, Vec<(Vec<u8>, Vec<u8>)>, bool);

/// The counters of a stream an RDB payload carries beside its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamMeta {
    /// `last-generated-id`.
    pub last_id: StreamId,
    /// `recorded-first-entry-id`.
    pub first_id: StreamId,
    /// `max-deleted-entry-id`.
    pub max_deleted_entry_id: StreamId,
    /// `entries-added`.
    pub entries_added: u64,
}

/// The error of a stream payload that does not hold together.
pub const ERR_BAD_PAYLOAD: &str = "ERR Bad data format";

impl Stream {
    /// The nodes in order, for DUMP. A node's entries are in the order
    /// Redis appended them: when `XSETID` lowered the last ID below
    /// deleted entries, later entries follow those (possibly with the
    /// same ID), as in Redis's listpack.
    pub fn nodes(&self) -> Vec<NodeView> {
        self.nodes
            .iter()
            .map(|(master, node)| NodeView {
                master_id: *master,
                master_fields: node.master_fields.clone(),
                lp_bytes: node.lp_bytes(),
                entries: node
                    .order
                    .iter()
                    .map(|e| (e.id, e.fields.clone(), e.deleted))
                    .collect(),
            })
            .collect()
    }

    /// RESTORE / RDB loading: appends a node (its master fields, and its
    /// entries in order with their deleted flags) after the existing ones.
    /// Counters are [`Stream::restore_meta`]'s. Refuses
    /// ([`ERR_BAD_PAYLOAD`]) a node without entries or with IDs not above
    /// every ID before them.
    pub fn restore_node(
        &mut self,
        master_fields: Vec<Vec<u8>>,
        entries: Vec<RestoredEntry>,
    ) -> Result<(), StreamError> {
        let bad = StreamError::Msg(ERR_BAD_PAYLOAD);
        let Some(master) = entries.first().map(|e| e.0) else {
            return Err(bad);
        };
        if self.nodes.contains_key(&master) {
            return Err(bad);
        }
        let mut node = Node {
            bytes: master_bytes(&master_fields),
            master_fields: Arc::new(master_fields),
            live: 0,
            deleted: 0,
            order: Vector::new(),
        };
        for (id, fields, deleted) in entries {
            let same = same_fields(&node.master_fields, &fields);
            node.bytes += entry_bytes(master, id, &fields, same);
            if deleted {
                node.deleted += 1;
            } else {
                node.live += 1;
            }
            node.order.push_back(Ent {
                id,
                fields: Arc::new(fields),
                deleted,
            });
        }
        self.length += node.live;
        self.nodes.insert(master, node);
        Ok(())
    }

    /// RESTORE / RDB loading: the stream's counters.
    pub fn restore_meta(&mut self, m: StreamMeta) {
        self.last_id = m.last_id;
        self.first_id = m.first_id;
        self.max_deleted_entry_id = m.max_deleted_entry_id;
        self.entries_added = m.entries_added;
    }

    /// RESTORE / RDB loading: a group as loaded (false when the name is
    /// taken). The caller keeps it consistent: each pending entry's
    /// consumer exists and lists it, and no consumer lists other IDs.
    pub fn restore_group(&mut self, name: Vec<u8>, g: Group) -> bool {
        if self.groups.contains_key(&name) {
            return false;
        }
        self.groups.insert(name, g);
        true
    }

    /// The counters, for DUMP.
    pub fn meta(&self) -> StreamMeta {
        StreamMeta {
            last_id: self.last_id,
            first_id: self.first_id,
            max_deleted_entry_id: self.max_deleted_entry_id,
            entries_added: self.entries_added,
        }
    }
}
