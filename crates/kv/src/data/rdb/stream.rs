//! Streams in the RDB object encoding: type 19 (`STREAM_LISTPACKS_2`,
//! what Redis 7.0 writes) and type 15 (`STREAM_LISTPACKS`, Redis 5 to
//! 6.2, read only).
//!
//! # The object (facts of Redis's `rdb.c` and `t_stream.c`)
//!
//! * The nodes: a count, then per node its key — the master ID as 16
//!   bytes (ms, seq, each u64 big endian) in a string — and its listpack
//!   in a string (LZF-compressed like any string when that pays).
//! * The stream: length, last ID (ms, seq); type 19 only: first ID, max
//!   deleted ID, entries added. All as RDB lengths.
//! * The groups: a count, then per group its name, last delivered ID
//!   (ms, seq), (type 19) `entries_read` (a length; -1 is written as
//!   2^64-1), its PEL — a count, then per entry the raw 16-byte ID, the
//!   delivery time (i64 little endian, ms) and the delivery count — and
//!   its consumers: a count, then per consumer its name, seen-time (i64
//!   little endian) and PEL — a count and raw 16-byte IDs, each of which
//!   must be in the group's PEL.
//!
//! A node's listpack: the master entry (live count, deleted count, the
//! number of master fields, the field names, a 0), then each entry:
//! flags (1 deleted, 2 same fields as the master), ms and seq as
//! differences from the master ID, then either the values only (same
//! fields) or a field count and field/value pairs, and last the number of
//! listpack elements the entry took before this one.
//!
//! Loading checks what Redis's deep sanitization checks: the listpack's
//! structure, the master entry, every entry's shape and back count, the
//! counts, nodes with entries, IDs in order, no duplicate group, consumer
//! or PEL entry, every consumer's PEL entry in its group's PEL and every
//! group PEL entry owned by a consumer.

use super::{bad, listpack, save_len, save_string, Entry, RdbError, Reader};
use crate::data::stream::{
    Consumer, Group, Nack, RestoredEntry, Stream, StreamId, StreamMeta, ENTRIES_READ_INVALID,
};
use crate::value::Value;
use imbl::{OrdMap, OrdSet};

/// Entry flag: deleted (kept in the listpack as a tombstone).
const FLAG_DELETED: i64 = 1;
/// Entry flag: its fields are the master entry's (values only stored).
const FLAG_SAMEFIELDS: i64 = 2;

fn id_key(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

fn id_from_key(k: &[u8]) -> Option<StreamId> {
    let ms: [u8; 8] = k.get(..8)?.try_into().ok()?;
    let seq: [u8; 8] = k.get(8..16)?.try_into().ok()?;
    Some(StreamId::new(
        u64::from_be_bytes(ms),
        u64::from_be_bytes(seq),
    ))
}

/// Appends the stream object (type byte excluded) of `s` to `out`.
pub(super) fn encode(s: &Stream, compress: bool, out: &mut Vec<u8>) {
    let nodes = s.nodes();
    save_len(out, nodes.len() as u64);
    for n in &nodes {
        save_string(out, &id_key(n.master_id), compress);
        let mut w = listpack::Writer::new();
        let live = n.entries.iter().filter(|e| !e.2).count() as i64;
        let deleted = n.entries.len() as i64 - live;
        w.append_int(live);
        w.append_int(deleted);
        w.append_int(n.master_fields.len() as i64);
        for f in n.master_fields.iter() {
            w.append(f);
        }
        w.append_int(0);
        for (id, fields, del) in &n.entries {
            let same = fields.len() == n.master_fields.len()
                && n.master_fields
                    .iter()
                    .zip(fields.iter())
                    .all(|(m, (f, _))| m == f);
            let mut flags = 0;
            if *del {
                flags |= FLAG_DELETED;
            }
            if same {
                flags |= FLAG_SAMEFIELDS;
            }
            w.append_int(flags);
            w.append_int(id.ms.wrapping_sub(n.master_id.ms) as i64);
            w.append_int(id.seq.wrapping_sub(n.master_id.seq) as i64);
            let nf = fields.len() as i64;
            if same {
                for (_, v) in fields.iter() {
                    w.append(v);
                }
                w.append_int(nf + 3);
            } else {
                w.append_int(nf);
                for (f, v) in fields.iter() {
                    w.append(f);
                    w.append(v);
                }
                w.append_int(2 * nf + 4);
            }
        }
        save_string(out, &w.finish(), compress);
    }
    let m = s.meta();
    save_len(out, s.len());
    save_len(out, m.last_id.ms);
    save_len(out, m.last_id.seq);
    save_len(out, m.first_id.ms);
    save_len(out, m.first_id.seq);
    save_len(out, m.max_deleted_entry_id.ms);
    save_len(out, m.max_deleted_entry_id.seq);
    save_len(out, m.entries_added);
    save_len(out, s.groups().len() as u64);
    for (name, g) in s.groups() {
        save_string(out, name, compress);
        save_len(out, g.last_id.ms);
        save_len(out, g.last_id.seq);
        save_len(out, g.entries_read as u64);
        save_len(out, g.pel.len() as u64);
        for (id, n) in &g.pel {
            out.extend_from_slice(&id_key(*id));
            out.extend_from_slice(&n.delivery_time.to_le_bytes());
            save_len(out, n.delivery_count);
        }
        save_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            save_string(out, cname, compress);
            out.extend_from_slice(&c.seen_time.to_le_bytes());
            save_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&id_key(*id));
            }
        }
    }
}

/// An integer element of a stream listpack (a string that spells one is
/// taken, as Redis's `lpGetIntegerIfValid` takes it).
fn int_of(e: Option<&Entry<'_>>) -> Result<i64, RdbError> {
    match e {
        Some(Entry::Int(i)) => Ok(*i),
        Some(Entry::Str(s)) => super::string2ll(s).ok_or(bad("stream listpack: not an integer")),
        None => Err(bad("stream listpack: truncated")),
    }
}

fn str_of(e: Option<&Entry<'_>>) -> Result<Vec<u8>, RdbError> {
    e.map(|e| e.to_bytes())
        .ok_or(bad("stream listpack: truncated"))
}

/// The master fields and entries of one node's listpack.
fn load_node(master: StreamId, lp: &[u8]) -> Result<(Vec<Vec<u8>>, Vec<RestoredEntry>), RdbError> {
    let els = listpack::parse(lp).ok_or(bad("Stream listpack integrity check failed."))?;
    if els.is_empty() {
        return Err(bad("Empty listpack inside stream"));
    }
    let mut it = els.iter();
    let count = int_of(it.next())?;
    let deleted = int_of(it.next())?;
    let nmaster = int_of(it.next())?;
    if count < 0 || deleted < 0 || nmaster < 0 {
        return Err(bad("stream listpack: negative count"));
    }
    let mut master_fields = Vec::new();
    for _ in 0..nmaster {
        master_fields.push(str_of(it.next())?);
    }
    if int_of(it.next())? != 0 {
        return Err(bad("stream listpack: master entry terminator"));
    }
    let mut entries: Vec<RestoredEntry> = Vec::new();
    let (mut live_seen, mut del_seen) = (0i64, 0i64);
    while let Some(first) = it.next() {
        let flags = int_of(Some(first))?;
        let ms = master.ms.wrapping_add(int_of(it.next())? as u64);
        let seq = master.seq.wrapping_add(int_of(it.next())? as u64);
        let id = StreamId::new(ms, seq);
        let mut fields = Vec::new();
        let want_back = if flags & FLAG_SAMEFIELDS != 0 {
            for f in &master_fields {
                fields.push((f.clone(), str_of(it.next())?));
            }
            nmaster + 3
        } else {
            let nf = int_of(it.next())?;
            if nf < 0 {
                return Err(bad("stream listpack: negative field count"));
            }
            for _ in 0..nf {
                let f = str_of(it.next())?;
                fields.push((f, str_of(it.next())?));
            }
            2 * nf + 4
        };
        if int_of(it.next())? != want_back {
            return Err(bad("stream listpack: entry back count"));
        }
        let del = flags & FLAG_DELETED != 0;
        if del {
            del_seen += 1;
        } else {
            live_seen += 1;
        }
        entries.push((id, fields, del));
    }
    if live_seen != count || del_seen != deleted {
        return Err(bad("stream listpack: entry counts"));
    }
    if entries.is_empty() {
        return Err(bad("Empty listpack inside stream"));
    }
    Ok((master_fields, entries))
}

fn raw_id(r: &mut Reader<'_>) -> Result<StreamId, RdbError> {
    id_from_key(r.take(16)?).ok_or(bad("short stream ID"))
}

fn ms_time(r: &mut Reader<'_>) -> Result<i64, RdbError> {
    let mut a = [0u8; 8];
    a.copy_from_slice(r.take(8)?);
    Ok(i64::from_le_bytes(a))
}

/// Reads a stream object (after its type byte); `v2` for type 19.
pub(super) fn load(r: &mut Reader<'_>, v2: bool) -> Result<Value, RdbError> {
    let mut s = Stream::new();
    let nodes = r.len()?;
    // Node keys ascend (a radix tree's order), every entry is at or above
    // its node's master ID, and live entries ascend across the stream. A
    // deleted entry may lie above later ones: after XSETID lowered the
    // last ID below it, Redis appends below it.
    let mut last_master: Option<StreamId> = None;
    let mut last_live: Option<StreamId> = None;
    for _ in 0..nodes {
        let key = r.string()?;
        if key.len() != 16 {
            return Err(bad("Stream node key entry is not the size of a stream ID"));
        }
        let master = id_from_key(&key).ok_or(bad("short stream ID"))?;
        if last_master.is_some_and(|l| master <= l) {
            return Err(bad("stream nodes out of order"));
        }
        last_master = Some(master);
        let lp = r.string()?;
        let (fields, entries) = load_node(master, &lp)?;
        for (id, _, deleted) in &entries {
            if *id < master {
                return Err(bad("stream entry below its node"));
            }
            if !deleted {
                if last_live.is_some_and(|l| *id <= l) {
                    return Err(bad("stream entries out of order"));
                }
                last_live = Some(*id);
            }
        }
        s.restore_node(fields, entries)
            .map_err(|_| bad("Stream node rejected"))?;
    }
    let length = r.len()?;
    if length != s.len() {
        return Err(bad("Stream length inconsistent"));
    }
    let last_id = StreamId::new(r.len()?, r.len()?);
    if last_live.is_some_and(|l| l > last_id) {
        return Err(bad("stream last ID below an entry"));
    }
    let meta = if v2 {
        StreamMeta {
            last_id,
            first_id: StreamId::new(r.len()?, r.len()?),
            max_deleted_entry_id: StreamId::new(r.len()?, r.len()?),
            entries_added: r.len()?,
        }
    } else {
        StreamMeta {
            last_id,
            first_id: s.first_live(),
            max_deleted_entry_id: StreamId::MIN,
            entries_added: length,
        }
    };
    s.restore_meta(meta);
    let ngroups = r.len()?;
    for _ in 0..ngroups {
        let name = r.string()?;
        let glast = StreamId::new(r.len()?, r.len()?);
        let entries_read = if v2 {
            r.len()? as i64
        } else {
            s.estimate_distance(glast)
        };
        if entries_read < ENTRIES_READ_INVALID {
            return Err(bad("stream group entries_read"));
        }
        let mut pel: OrdMap<StreamId, Nack> = OrdMap::new();
        for _ in 0..r.len()? {
            let id = raw_id(r)?;
            let delivery_time = ms_time(r)?;
            let delivery_count = r.len()?;
            let nack = Nack {
                consumer: Vec::new(),
                delivery_time,
                delivery_count,
            };
            if pel.insert(id, nack).is_some() {
                return Err(bad(
                    "Duplicated global PEL entry loading stream consumer group",
                ));
            }
        }
        let mut consumers: OrdMap<Vec<u8>, Consumer> = OrdMap::new();
        let mut owned: OrdSet<StreamId> = OrdSet::new();
        for _ in 0..r.len()? {
            let cname = r.string()?;
            if consumers.contains_key(&cname) {
                return Err(bad("Duplicate stream consumer detected."));
            }
            let seen_time = ms_time(r)?;
            let mut cpel = OrdSet::new();
            for _ in 0..r.len()? {
                let id = raw_id(r)?;
                let n = pel
                    .get_mut(&id)
                    .ok_or(bad("Consumer entry not found in group global PEL"))?;
                if owned.insert(id).is_some() || cpel.insert(id).is_some() {
                    return Err(bad(
                        "Duplicated consumer PEL entry loading a stream consumer group",
                    ));
                }
                n.consumer = cname.clone();
            }
            consumers.insert(
                cname,
                Consumer {
                    seen_time,
                    pel: cpel,
                },
            );
        }
        if owned.len() != pel.len() {
            return Err(bad("Stream CG PEL entry without consumer"));
        }
        let g = Group {
            last_id: glast,
            entries_read,
            pel,
            consumers,
        };
        if !s.restore_group(name, g) {
            return Err(bad("Duplicated consumer group name"));
        }
    }
    Ok(Value::Stream(s))
}
