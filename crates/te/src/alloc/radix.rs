//! A monotone priority queue (radix heap) for the path search: keys
//! taken out never decrease, which a goal-directed Dijkstra with a
//! consistent bound guarantees (a node's key is at least the key of the
//! node it was reached from).
//!
//! Entries sit in 65 buckets by the highest bit in which their key
//! differs from the last key taken out (bucket 0: equal to it). Taking
//! out reads bucket 0, or when it is empty finds the least key of the
//! first bucket that is not, makes it the last key and spreads that
//! bucket over lower ones. An entry moves down at most once per bit, and
//! a push is one append, rather than a binary heap's sifting through
//! `log n` levels on every push and pop.

/// The queue: `(key, node)` entries, least key first; entries of equal
/// keys in no stated (but deterministic) order.
#[derive(Debug, Clone)]
pub(super) struct RadixHeap {
    /// The last key taken out (0 when empty): no key in the queue is
    /// below it.
    last: u64,
    /// Entries in the queue.
    len: usize,
    /// Bit `i` set: bucket `i` is not empty.
    full: u128,
    buckets: Vec<Vec<(u64, u32)>>,
}

impl Default for RadixHeap {
    fn default() -> Self {
        RadixHeap {
            last: 0,
            len: 0,
            full: 0,
            buckets: vec![Vec::new(); 65],
        }
    }
}

/// The bucket of `key` when `last` was the last key taken out.
fn bucket(last: u64, key: u64) -> usize {
    (u64::BITS - (key ^ last).leading_zeros()) as usize
}

impl RadixHeap {
    /// Empty it (keeping its memory); the next key may be any.
    pub(super) fn clear(&mut self) {
        while self.full != 0 {
            let i = self.full.trailing_zeros() as usize;
            self.buckets[i].clear();
            self.full &= !(1 << i);
        }
        self.last = 0;
        self.len = 0;
    }

    /// Add `node` under `key`, which must not be below the last key
    /// taken out (it is taken as that key if it is: debug builds
    /// panic).
    pub(super) fn push(&mut self, key: u64, node: u32) {
        debug_assert!(key >= self.last, "radix heap: {key} below {}", self.last);
        let key = key.max(self.last);
        let b = bucket(self.last, key);
        self.buckets[b].push((key, node));
        self.full |= 1 << b;
        self.len += 1;
    }

    /// Take out an entry of the least key.
    pub(super) fn pop(&mut self) -> Option<(u64, u32)> {
        if self.len == 0 {
            return None;
        }
        if self.full & 1 == 0 {
            let i = self.full.trailing_zeros() as usize;
            let mut spread = std::mem::take(&mut self.buckets[i]);
            self.full &= !(1 << i);
            let least = spread.iter().map(|e| e.0).min().expect("a full bucket");
            self.last = least;
            for &(key, node) in &spread {
                let b = bucket(least, key);
                self.buckets[b].push((key, node));
                self.full |= 1 << b;
            }
            spread.clear();
            self.buckets[i] = spread;
        }
        let e = self.buckets[0].pop().expect("bucket 0 is full");
        if self.buckets[0].is_empty() {
            self.full &= !1;
        }
        self.len -= 1;
        Some(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seeded runs of pushes and pops, as a search makes them (each push
    /// at or above the last key taken out), give the keys a sorted list
    /// gives.
    #[test]
    fn pops_in_the_order_of_a_sorted_list() {
        for seed in 1..=50u64 {
            let mut rnd = crate::alloc::testing::below(seed);
            let mut h = RadixHeap::default();
            let mut want: Vec<u64> = Vec::new();
            let mut last = 0u64;
            for round in 0..3 {
                for _ in 0..2_000 {
                    if want.is_empty() || rnd(3) != 0 {
                        // Keys near the last, and now and then far off.
                        let key = if rnd(50) == 0 {
                            (u64::MAX - rnd(3) as u64).max(last)
                        } else {
                            let bits = rnd(40) / 2;
                            last.saturating_add(rnd(1 << bits) as u64)
                        };
                        h.push(key, rnd(1000) as u32);
                        want.push(key);
                    } else {
                        want.sort_unstable_by(|a, b| b.cmp(a));
                        let k = want.pop().expect("not empty");
                        let (got, _) = h.pop().expect("not empty");
                        assert_eq!(got, k, "seed {seed} round {round}");
                        last = got;
                    }
                }
                if round == 1 {
                    h.clear();
                    want.clear();
                    last = 0;
                }
            }
            want.sort_unstable_by(|a, b| b.cmp(a));
            while let Some(k) = want.pop() {
                assert_eq!(h.pop().map(|e| e.0), Some(k), "seed {seed} at the end");
            }
            assert_eq!(h.pop(), None, "seed {seed}: empty");
        }
    }
}
