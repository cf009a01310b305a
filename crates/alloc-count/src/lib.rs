//! `xlane-alloc-count`: the counting global allocator of xlane's
//! no-allocation tests (the lane, X-FD, the host's lane loop, R2P2's cores:
//! "no allocation on the real-time path").
//!
//! A test binary installs it and counts what a closure allocates on the
//! calling thread:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: xlane_alloc_count::Counting = xlane_alloc_count::Counting;
//!
//! fn hot_path(buf: &mut [u8; 64]) -> usize {
//!     buf.iter_mut().for_each(|b| *b = b.wrapping_add(1));
//!     buf.len()
//! }
//!
//! fn main() {
//!     let mut buf = [0u8; 64];
//!     let (len, n) = xlane_alloc_count::counted(|| hot_path(&mut buf));
//!     assert_eq!((len, n), (64, 0));
//! }
//! ```
//!
//! Only allocations (`alloc`, `alloc_zeroed`, `realloc`) of a thread that
//! armed the counter are counted, so the test harness's own threads do not
//! disturb the count; frees are not counted. The allocator forwards
//! everything to the system allocator.
#![warn(missing_docs)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Allocations counted so far, over every armed thread.
static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

/// The system allocator, counting the allocations of armed threads.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counting;

fn note() {
    if ARMED.try_with(|a| a.get()).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; the
// counting touches only an atomic and a thread-local flag (`try_with`, so
// allocations during thread teardown are fine).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note();
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc_zeroed(l) }
    }
}

/// Arms (or disarms) counting on the calling thread.
pub fn arm(on: bool) {
    ARMED.with(|a| a.set(on));
}

/// Allocations counted so far on every armed thread.
pub fn total() -> u64 {
    ALLOCS.load(Ordering::Relaxed)
}

/// Runs `f` with the calling thread armed: its result and how many
/// allocations it made (other armed threads' allocations in that time
/// count too).
pub fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = total();
    arm(true);
    let r = f();
    arm(false);
    (r, total() - before)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    #[test]
    fn counts_what_the_armed_closure_allocates() {
        let (b, n) = counted(|| std::hint::black_box(Box::new(7u64)));
        assert_eq!((*b, n), (7, 1));
        let (v, n) = counted(|| {
            let mut v: Vec<u64> = Vec::with_capacity(1);
            v.extend([1, 2, 3]); // grows: a realloc
            v
        });
        assert_eq!((v.len(), n), (3, 2));
        // Disarmed: nothing counted.
        let before = total();
        let v = std::hint::black_box(vec![0u8; 64]);
        assert_eq!((v.len(), total()), (64, before));
    }
}
