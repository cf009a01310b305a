use super::*;

/// Past the cap the oldest tombstones go and the floor rises: a key
/// whose tombstone went reads as removed at the floor (a possible
/// spurious abort, never a missed change).
#[test]
fn tombstones_are_bounded() {
    let mut t = Tombstones::default();
    for i in 0..MAX_TOMBSTONES as u64 + 2 {
        t.bury(&i.to_le_bytes(), i + 1);
    }
    assert_eq!(t.len(), MAX_TOMBSTONES);
    assert_eq!(t.stamp(&0u64.to_le_bytes()), 2);
    assert_eq!(t.stamp(&1u64.to_le_bytes()), 2);
    assert_eq!(t.stamp(&2u64.to_le_bytes()), 3);
    assert_eq!(t.stamp(b"never"), 2);
    // Burying again moves a key's stamp without growing the set.
    t.bury(&2u64.to_le_bytes(), 1_000_000);
    assert_eq!(t.len(), MAX_TOMBSTONES);
    assert_eq!(t.stamp(&2u64.to_le_bytes()), 1_000_000);
}
