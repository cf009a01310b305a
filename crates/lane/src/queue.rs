//! Fixed-capacity pending-chunk store with one FIFO per producer and a round-robin
//! ring of producers that have chunks. All memory is allocated in `new`.

/// Largest data capacity of any schema.
pub(crate) const MAX_DATA: usize = {
    let a = xlane_wire::Schema::Chunk26.data_capacity();
    let b = xlane_wire::Schema::Chunk36.data_capacity();
    if a > b {
        a
    } else {
        b
    }
};

const NIL: u16 = u16::MAX;
const PRODUCERS: usize = 256;

#[derive(Clone, Copy)]
struct Slot {
    data: [u8; MAX_DATA],
    len: u8,
    next: u16,
}

pub(crate) struct ChunkQueue {
    slots: Box<[Slot]>,
    free: u16,
    used: usize,
    head: Box<[u16; PRODUCERS]>,
    tail: Box<[u16; PRODUCERS]>,
    depth: Box<[u16; PRODUCERS]>,
    /// Ring of producers with queued chunks, in round-robin order.
    ring: Box<[u8; PRODUCERS]>,
    ring_start: usize,
    ring_len: usize,
}

impl ChunkQueue {
    /// `capacity` in `1..NIL`; checked by the caller.
    pub(crate) fn new(capacity: usize) -> Self {
        let mut slots = vec![
            Slot {
                data: [0; MAX_DATA],
                len: 0,
                next: NIL,
            };
            capacity
        ]
        .into_boxed_slice();
        for (i, s) in slots.iter_mut().enumerate() {
            s.next = if i + 1 < capacity {
                (i + 1) as u16
            } else {
                NIL
            };
        }
        ChunkQueue {
            slots,
            free: if capacity > 0 { 0 } else { NIL },
            used: 0,
            head: Box::new([NIL; PRODUCERS]),
            tail: Box::new([NIL; PRODUCERS]),
            depth: Box::new([0; PRODUCERS]),
            ring: Box::new([0; PRODUCERS]),
            ring_start: 0,
            ring_len: 0,
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.used
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.used == 0
    }

    pub(crate) fn len_of(&self, producer: u8) -> usize {
        self.depth[producer as usize] as usize
    }

    /// Appends a chunk; `false` if the store is full. `data.len() <= MAX_DATA`
    /// is checked by the caller (longer data is cut, never overflows).
    pub(crate) fn push(&mut self, producer: u8, data: &[u8]) -> bool {
        let idx = self.free;
        if idx == NIL {
            return false;
        }
        let n = data.len().min(MAX_DATA);
        let s = &mut self.slots[idx as usize];
        self.free = s.next;
        s.data[..n].copy_from_slice(&data[..n]);
        s.len = n as u8;
        s.next = NIL;
        let p = producer as usize;
        if self.tail[p] == NIL {
            self.head[p] = idx;
            let at = (self.ring_start + self.ring_len) % PRODUCERS;
            self.ring[at] = producer;
            self.ring_len += 1;
        } else {
            let t = self.tail[p] as usize;
            self.slots[t].next = idx;
        }
        self.tail[p] = idx;
        self.depth[p] += 1;
        self.used += 1;
        true
    }

    /// The producer whose turn it is and its oldest chunk, without removing it.
    pub(crate) fn peek(&self) -> Option<(u8, &[u8])> {
        if self.ring_len == 0 {
            return None;
        }
        let p = self.ring[self.ring_start];
        let idx = self.head[p as usize];
        let s = self.slots.get(idx as usize)?;
        Some((p, &s.data[..s.len as usize]))
    }

    /// Removes the chunk [`Self::peek`] returned and moves its producer to the back
    /// of the ring (or out of it, if it has no more chunks).
    pub(crate) fn pop(&mut self) {
        if self.ring_len == 0 {
            return;
        }
        let p = self.ring[self.ring_start];
        let pi = p as usize;
        let idx = self.head[pi];
        if idx == NIL {
            return;
        }
        let next = self.slots[idx as usize].next;
        self.head[pi] = next;
        if next == NIL {
            self.tail[pi] = NIL;
        }
        self.slots[idx as usize].next = self.free;
        self.free = idx;
        self.depth[pi] -= 1;
        self.used -= 1;
        self.ring_start = (self.ring_start + 1) % PRODUCERS;
        self.ring_len -= 1;
        if next != NIL {
            let at = (self.ring_start + self.ring_len) % PRODUCERS;
            self.ring[at] = p;
            self.ring_len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(q: &mut ChunkQueue) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some((p, d)) = q.peek() {
            out.push((p, d.to_vec()));
            q.pop();
        }
        out
    }

    #[test]
    fn round_robin_across_producers_fifo_within() {
        let mut q = ChunkQueue::new(16);
        for (p, d) in [(1u8, 1u8), (1, 2), (1, 3), (2, 10), (3, 20), (3, 21)] {
            assert!(q.push(p, &[d]));
        }
        let order: Vec<_> = drain(&mut q).into_iter().map(|(p, d)| (p, d[0])).collect();
        assert_eq!(order, [(1, 1), (2, 10), (3, 20), (1, 2), (3, 21), (1, 3)]);
        assert!(q.is_empty());
    }

    #[test]
    fn capacity_is_enforced_and_slots_are_reused() {
        let mut q = ChunkQueue::new(3);
        assert!(q.push(0, b"a") && q.push(0, b"b") && q.push(5, b"c"));
        assert!(!q.push(5, b"d"));
        assert_eq!((q.len(), q.len_of(0), q.len_of(5)), (3, 2, 1));
        q.pop();
        assert!(q.push(5, b"e"));
        let got = drain(&mut q);
        assert_eq!(got.len(), 3);
        for round in 0..3 {
            for p in 0..=255u8 {
                assert!(q.push(p, &[round]) || q.len() == 3);
            }
            assert_eq!(drain(&mut q).len(), 3);
        }
    }

    #[test]
    fn all_256_producers_fit_the_ring() {
        let mut q = ChunkQueue::new(600);
        for p in 0..=255u8 {
            assert!(q.push(p, &[p]) && q.push(p, &[p]));
        }
        let got = drain(&mut q);
        assert_eq!(got.len(), 512);
        assert!(got[..256]
            .iter()
            .enumerate()
            .all(|(i, (p, _))| *p as usize == i));
    }
}
