//! The stream's consumer-group operations: creating groups and
//! consumers, group reads, acknowledgements, pending queries, claims and
//! `XSETID`.

use super::error::{msg, StreamError};
use super::group::{
    AutoClaimOutcome, ClaimDelivery, ClaimOptions, ClaimOutcome, Claimed, Consumer, Group,
    GroupRead, Nack, PendingEntry, PendingRange, PendingSummary, ReadFrom, Xautoclaim,
    ENTRIES_READ_INVALID,
};
use super::id::StreamId;
use super::log::{ms, Stream};
use imbl::OrdSet;

impl Stream {
    /// XGROUP CREATE: false when the group exists. `entries_read` is
    /// `ENTRIESREAD` ([`ENTRIES_READ_INVALID`] when not given).
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups
            .insert(name.to_vec(), Group::new(last_id, entries_read));
        true
    }

    /// XGROUP SETID: false when there is no such group.
    pub fn set_group_id(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        match self.groups.get_mut(name) {
            Some(g) => {
                g.last_id = last_id;
                g.entries_read = entries_read;
                true
            }
            None => false,
        }
    }

    /// XGROUP DESTROY: false when there is no such group.
    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// XGROUP CREATECONSUMER: `None` without the group, else whether the
    /// consumer was created (seen-time `now_ms`).
    pub fn create_consumer(&mut self, group: &[u8], consumer: &[u8], now_ms: u64) -> Option<bool> {
        let g = self.groups.get_mut(group)?;
        if g.consumers.contains_key(consumer) {
            return Some(false);
        }
        g.consumers.insert(
            consumer.to_vec(),
            Consumer {
                seen_time: ms(now_ms),
                pel: OrdSet::new(),
            },
        );
        Some(true)
    }

    /// XGROUP DELCONSUMER: `None` without the group, else the number of
    /// entries the consumer had pending (dropped from the group's PEL); 0
    /// when there is no such consumer.
    pub fn delete_consumer(&mut self, group: &[u8], consumer: &[u8]) -> Option<u64> {
        let g = self.groups.get_mut(group)?;
        let Some(c) = g.consumers.remove(consumer) else {
            return Some(0);
        };
        for id in c.pel.iter() {
            g.pel.remove(id);
        }
        Some(c.pel.len() as u64)
    }

    // -- consumer groups: reading and acknowledging -------------------

    /// XREADGROUP's part for one stream (`None`: no such group). `New`
    /// (`>`) serves entries after the group's last delivered ID when there
    /// are any, creating or updating pending entries (unless `noack`),
    /// advancing the group and its read counter; `After(id)` serves the
    /// consumer's own pending entries after `id` (their delivery time and
    /// count updated), which happens even when the stream is empty. The
    /// consumer is looked up (seen-time `now_ms`) or created only when the
    /// stream is served. `count` 0: no limit.
    pub fn read_group(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        from: ReadFrom,
        count: usize,
        noack: bool,
        now_ms: u64,
    ) -> Option<GroupRead> {
        let now = ms(now_ms);
        let take = if count == 0 { usize::MAX } else { count };
        let g = self.groups.get(group)?;
        match from {
            ReadFrom::After(after) => {
                let start = after.incr().unwrap_or(StreamId::MIN);
                let mut g = g.clone();
                let created = g.touch_consumer(consumer, now);
                let ids: Vec<StreamId> = g
                    .consumers
                    .get(consumer)
                    .map(|c| c.pel.range(start..).take(take).copied().collect())
                    .unwrap_or_default();
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    match self.get(id) {
                        Some(f) => {
                            out.push((id, Some(f.clone())));
                            if let Some(n) = g.pel.get_mut(&id) {
                                n.delivery_time = now;
                                n.delivery_count = n.delivery_count.wrapping_add(1);
                            }
                        }
                        None => out.push((id, None)),
                    }
                }
                self.groups.insert(group.to_vec(), g);
                Some(GroupRead {
                    entries: Some(out),
                    consumer_created: created,
                })
            }
            ReadFrom::New => {
                let serve = self.last_entry_id().is_some_and(|last| last > g.last_id);
                if !serve {
                    return Some(GroupRead {
                        entries: None,
                        consumer_created: false,
                    });
                }
                let start = g.last_id.incr().unwrap_or(StreamId::MIN);
                let mut g = g.clone();
                let created = g.touch_consumer(consumer, now);
                let served = self.range(start, StreamId::MAX, take, false);
                let mut out = Vec::with_capacity(served.len());
                for (id, fields) in served {
                    if id > g.last_id {
                        if g.entries_read != ENTRIES_READ_INVALID && !self.tombstones_from(id) {
                            g.entries_read = g.entries_read.wrapping_add(1);
                        } else if self.entries_added != 0 {
                            g.entries_read = self.estimate_distance(id);
                        }
                        g.last_id = id;
                    }
                    if !noack {
                        match g.pel.get_mut(&id) {
                            Some(n) => {
                                n.delivery_time = now;
                                n.delivery_count = 1;
                                g.reassign(id, consumer);
                            }
                            None => {
                                g.pel.insert(
                                    id,
                                    Nack {
                                        consumer: consumer.to_vec(),
                                        delivery_time: now,
                                        delivery_count: 1,
                                    },
                                );
                                if let Some(c) = g.consumers.get_mut(consumer) {
                                    c.pel.insert(id);
                                }
                            }
                        }
                    }
                    out.push((id, Some(fields)));
                }
                self.groups.insert(group.to_vec(), g);
                Some(GroupRead {
                    entries: Some(out),
                    consumer_created: created,
                })
            }
        }
    }

    /// XACK: `None` without the group, else how many of `ids` were pending
    /// (and no longer are).
    pub fn ack(&mut self, group: &[u8], ids: &[StreamId]) -> Option<u64> {
        let g = self.groups.get_mut(group)?;
        Some(ids.iter().filter(|&&id| g.drop_nack(id)).count() as u64)
    }

    /// XPENDING's summary (`None` without the group).
    pub fn pending_summary(&self, group: &[u8]) -> Option<PendingSummary> {
        let g = self.groups.get(group)?;
        let bounds = match (g.pel.get_min(), g.pel.get_max()) {
            (Some((lo, _)), Some((hi, _))) => Some((*lo, *hi)),
            _ => None,
        };
        let consumers = g
            .consumers
            .iter()
            .filter(|(_, c)| !c.pel.is_empty())
            .map(|(n, c)| (n.clone(), c.pel.len() as u64))
            .collect();
        Some(PendingSummary {
            count: g.pel.len() as u64,
            bounds,
            consumers,
        })
    }

    /// XPENDING's extended form (`None` without the group; an unknown
    /// consumer gives no line). Idle times from `now_ms`.
    pub fn pending_range(
        &self,
        group: &[u8],
        r: &PendingRange,
        now_ms: u64,
    ) -> Option<Vec<PendingEntry>> {
        let g = self.groups.get(group)?;
        let now = ms(now_ms);
        let mut out = Vec::new();
        if r.start > r.end || r.count == 0 {
            return Some(out);
        }
        let ids: Box<dyn Iterator<Item = StreamId> + '_> = match &r.consumer {
            Some(name) => match g.consumers.get(name.as_slice()) {
                Some(c) => Box::new(c.pel.range(r.start..=r.end).copied()),
                None => return Some(out),
            },
            None => Box::new(g.pel.range(r.start..=r.end).map(|(k, _)| *k)),
        };
        for id in ids {
            let Some(n) = g.pel.get(&id) else { continue };
            let idle = now.wrapping_sub(n.delivery_time);
            if r.min_idle != 0 && idle < r.min_idle {
                continue;
            }
            out.push(PendingEntry {
                id,
                consumer: n.consumer.clone(),
                idle: idle.max(0),
                delivery_count: n.delivery_count,
            });
            if out.len() as u64 >= r.count {
                break;
            }
        }
        Some(out)
    }

    /// XCLAIM (`None` without the group): `LASTID` first, then each ID in
    /// order: a pending ID no longer in the stream leaves the PEL; one
    /// pending (or, with FORCE, present in the stream) and idle at least
    /// `min_idle` goes to `consumer` (created if needed) with the delivery
    /// time of IDLE/TIME (else `now_ms`) and its count set by RETRYCOUNT or
    /// incremented (not with JUSTID).
    pub fn claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        ids: &[StreamId],
        o: &ClaimOptions,
        now_ms: u64,
    ) -> Option<ClaimOutcome> {
        let now = ms(now_ms);
        let mut g = self.groups.get(group)?.clone();
        if let Some(l) = o.last_id {
            if l > g.last_id {
                g.last_id = l;
            }
        }
        let delivery = match o.delivery {
            Some(ClaimDelivery::Idle(idle)) => Some(now.wrapping_sub(idle)),
            Some(ClaimDelivery::Time(t)) => Some(t),
            None => None,
        };
        let delivery = match delivery {
            Some(d) if (0..=now).contains(&d) => d,
            _ => now,
        };
        let min_idle = o.min_idle.max(0);
        let retry = o.retry_count.filter(|&r| r >= 0);
        let mut claimed = Claimed::new(o.just_id);
        let mut looked_up = false;
        let mut created = false;
        for &id in ids {
            let Some(fields) = self.get(id) else {
                g.drop_nack(id);
                continue;
            };
            let forced = if g.pel.contains_key(&id) {
                false
            } else if o.force {
                true
            } else {
                continue;
            };
            if !forced && min_idle != 0 {
                if let Some(n) = g.pel.get(&id) {
                    if now.wrapping_sub(n.delivery_time) < min_idle {
                        continue;
                    }
                }
            }
            if !looked_up {
                created = g.touch_consumer(consumer, now);
                looked_up = true;
            }
            if forced {
                g.pel.insert(
                    id,
                    Nack {
                        consumer: consumer.to_vec(),
                        delivery_time: now,
                        delivery_count: 1,
                    },
                );
            }
            if let Some(n) = g.pel.get_mut(&id) {
                n.delivery_time = delivery;
                if let Some(r) = retry {
                    n.delivery_count = r as u64;
                } else if !o.just_id {
                    n.delivery_count = n.delivery_count.wrapping_add(1);
                }
            }
            g.reassign(id, consumer);
            claimed.push(id, fields);
        }
        self.groups.insert(group.to_vec(), g);
        Some(ClaimOutcome {
            claimed,
            consumer_created: created,
        })
    }

    /// XAUTOCLAIM (`None` without the group): scans the PEL from `start`,
    /// examining at most 10 × `count` entries and claiming at most `count`
    /// (pending IDs found deleted from the stream count too: they leave
    /// the PEL and are reported); claimed entries go to `consumer` with
    /// delivery time `now_ms` and, without JUSTID, one more delivery.
    pub fn autoclaim(&mut self, a: &Xautoclaim, now_ms: u64) -> Option<AutoClaimOutcome> {
        let (consumer, just_id) = (a.consumer.as_slice(), a.just_id);
        let now = ms(now_ms);
        let mut g = self.groups.get(&a.group)?.clone();
        let min_idle = a.min_idle.max(0);
        let mut count = a.count;
        let mut attempts = count.saturating_mul(10);
        let mut claimed = Claimed::new(just_id);
        let mut deleted = Vec::new();
        let mut looked_up = false;
        let mut created = false;
        let mut pos = Some(a.start);
        let mut last_seen: Option<StreamId> = None;
        let mut eof = false;
        loop {
            if attempts == 0 {
                break;
            }
            attempts -= 1;
            if count == 0 {
                break;
            }
            let next =
                pos.and_then(|p| g.pel.range(p..).next().map(|(k, n)| (*k, n.delivery_time)));
            let Some((id, delivered)) = next else {
                eof = true;
                break;
            };
            last_seen = Some(id);
            pos = id.incr();
            let Some(fields) = self.get(id) else {
                g.drop_nack(id);
                deleted.push(id);
                count -= 1;
                continue;
            };
            if min_idle != 0 && now.wrapping_sub(delivered) < min_idle {
                continue;
            }
            if !looked_up {
                created = g.touch_consumer(consumer, now);
                looked_up = true;
            }
            if let Some(n) = g.pel.get_mut(&id) {
                n.delivery_time = now;
                if !just_id {
                    n.delivery_count = n.delivery_count.wrapping_add(1);
                }
            }
            g.reassign(id, consumer);
            claimed.push(id, fields);
            count -= 1;
        }
        let next = if eof {
            StreamId::MIN
        } else {
            last_seen
                .and_then(StreamId::incr)
                .and_then(|p| g.pel.range(p..).next().map(|(k, _)| *k))
                .unwrap_or(StreamId::MIN)
        };
        self.groups.insert(a.group.clone(), g);
        Some(AutoClaimOutcome {
            next,
            claimed,
            deleted,
            consumer_created: created,
        })
    }

    // -- XSETID -------------------------------------------------------

    /// XSETID: sets the last ID, and `entries_added` and
    /// `max_deleted_entry_id` when given (a `0-0` max-deleted ID is as not
    /// given). Errors as Redis's.
    pub fn set_id(
        &mut self,
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) -> Result<(), StreamError> {
        if let Some(m) = max_deleted {
            if last_id < m {
                return Err(StreamError::Msg(msg::XSETID_BELOW_MAXDELETED));
            }
        }
        if let Some(top) = self.last_entry_id() {
            if last_id < top {
                return Err(StreamError::Msg(msg::XSETID_BELOW_TOP));
            }
            if let Some(a) = entries_added {
                if self.len() > a {
                    return Err(StreamError::Msg(msg::XSETID_ENTRIES_ADDED_SMALL));
                }
            }
        }
        self.last_id = last_id;
        if let Some(a) = entries_added {
            self.entries_added = a;
        }
        if let Some(m) = max_deleted {
            if !m.is_zero() {
                self.max_deleted_entry_id = m;
            }
        }
        Ok(())
    }
}
