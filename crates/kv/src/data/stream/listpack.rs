//! The model of Redis's radix tree of listpack nodes: each node's master
//! ID, counts and exact byte size, so trimming and `XINFO` match Redis.

use super::entry::Fields;
use super::id::StreamId;
use crate::resp::parse_i64_strict;
use imbl::Vector;
use std::sync::Arc;

/// Bytes of a listpack's header (total bytes, element count) and its end
/// marker.
pub(super) const LP_EMPTY_BYTES: u64 = 6 + 1;

/// Redis's cap on one listpack (and on an entry's total field/value
/// bytes).
pub(super) const LISTPACK_MAX_SIZE: u64 = 1 << 30;

/// Encoded length of an integer element (without its back-length).
pub(super) fn lp_int_len(v: i64) -> u64 {
    match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8_388_608..=8_388_607 => 4,
        -2_147_483_648..=2_147_483_647 => 5,
        _ => 9,
    }
}

/// Bytes of the back-length that follows an element of `l` bytes.
pub(super) fn lp_backlen(l: u64) -> u64 {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Bytes an integer element takes in a listpack.
pub(super) fn lp_int(v: i64) -> u64 {
    let l = lp_int_len(v);
    l + lp_backlen(l)
}

/// A string as listpacks test it for integer encoding: canonical
/// decimal (no leading zeros, no `+`, `-0` refused), within `i64`,
/// shorter than 21 bytes.
pub(super) fn lp_string_int(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= 21 {
        return None;
    }
    parse_i64_strict(s)
}

/// Bytes a string element takes in a listpack.
pub(super) fn lp_str(s: &[u8]) -> u64 {
    if let Some(v) = lp_string_int(s) {
        return lp_int(v);
    }
    let n = s.len() as u64;
    let l = if n < 64 {
        1 + n
    } else if n < 4096 {
        2 + n
    } else {
        5 + n
    };
    l + lp_backlen(l)
}

/// One node of Redis's radix tree of listpacks, as far as it shows: the
/// model that makes approximate trimming and `XINFO` match Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Node {
    /// The master entry's field names (the node's first entry's).
    pub(super) master_fields: Arc<Vec<Vec<u8>>>,
    /// Entries not deleted.
    pub(super) live: u64,
    /// Entries flagged deleted (still in the listpack).
    pub(super) deleted: u64,
    /// The listpack's bytes, but for its two counters.
    pub(super) bytes: u64,
    /// The entries in listpack (append) order, deleted ones included.
    /// Live entries ascend in the normal course; deleted ones need not:
    /// after `XSETID` lowers the last ID below deleted entries, Redis
    /// appends below them (even with the same ID).
    pub(super) order: Vector<Ent>,
}

/// An entry of a node's listpack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Ent {
    pub(super) id: StreamId,
    pub(super) fields: Fields,
    /// Flagged deleted (a tombstone).
    pub(super) deleted: bool,
}

impl Node {
    /// The last entry written to the node (deleted or not).
    pub(super) fn last(&self) -> Option<StreamId> {
        self.order.last().map(|e| e.id)
    }

    /// The listpack's total bytes.
    pub(super) fn lp_bytes(&self) -> u64 {
        self.bytes + lp_int(self.live as i64) + lp_int(self.deleted as i64)
    }
}

/// Flags entry `i` of `node` deleted (it stays in the listpack).
pub(super) fn flag_deleted(node: &mut Node, i: usize) {
    if let Some(e) = node.order.get_mut(i) {
        e.deleted = true;
    }
}

/// A node's listpack bytes before its first entry (header, master
/// entry, end marker), but for its two counters.
pub(super) fn master_bytes(names: &[Vec<u8>]) -> u64 {
    LP_EMPTY_BYTES
        + lp_int(names.len() as i64)
        + names.iter().map(|f| lp_str(f)).sum::<u64>()
        + lp_int(0)
}

/// The listpack bytes of entry `id` in the node of `master` (`same`: its
/// fields are the master entry's, so only values are stored).
pub(super) fn entry_bytes(
    master: StreamId,
    id: StreamId,
    fields: &[(Vec<u8>, Vec<u8>)],
    same: bool,
) -> u64 {
    let n = fields.len() as i64;
    let mut bytes = lp_int(if same { 2 } else { 0 })
        + lp_int(id.ms.wrapping_sub(master.ms) as i64)
        + lp_int(id.seq.wrapping_sub(master.seq) as i64)
        + fields.iter().map(|(_, v)| lp_str(v)).sum::<u64>();
    let mut lp_count = n + 3;
    if !same {
        bytes += lp_int(n) + fields.iter().map(|(f, _)| lp_str(f)).sum::<u64>();
        lp_count += n + 1;
    }
    bytes + lp_int(lp_count)
}

pub(super) fn same_fields(master: &[Vec<u8>], fields: &[(Vec<u8>, Vec<u8>)]) -> bool {
    master.len() == fields.len() && master.iter().zip(fields).all(|(m, (f, _))| m == f)
}

/// Nodes of a compressed radix tree (Redis's rax) holding `keys` (sorted,
/// distinct, all equal on their first `d` bytes), counted from depth `d`:
/// a leaf per key, a node per branching point and one per run of bytes
/// between them.
pub(super) fn rax_nodes(keys: &[[u8; 16]], d: usize) -> u64 {
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return 0;
    };
    if d >= 16 {
        return 1;
    }
    if first[d] == last[d] {
        let mut e = d;
        while e < 16 && first[e] == last[e] {
            e += 1;
        }
        return 1 + rax_nodes(keys, e);
    }
    let mut n = 1;
    let mut i = 0;
    while i < keys.len() {
        let b = keys[i][d];
        let j = i + keys[i..].iter().take_while(|k| k[d] == b).count();
        n += rax_nodes(&keys[i..j], d + 1);
        i = j;
    }
    n
}
