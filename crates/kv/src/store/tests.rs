use super::*;
use crate::value::{Score, ZSet};

/// Published messages queue only while someone subscribes, and at
/// most [`MAX_QUEUED_EVENT_BYTES`] of them between two drains.
#[test]
fn published_messages_queue_bounded_and_only_for_subscribers() {
    let mut s = Store::new();
    let mib = vec![b'm'; 1 << 20];
    s.publish(b"ch", &mib, false);
    assert_eq!(s.drain_events().count(), 0, "nobody subscribes");
    s.set_subscribers(true);
    for _ in 0..100 {
        s.publish(b"ch", &mib, false);
    }
    assert_eq!(s.events_dropped(), 37);
    assert_eq!(s.drain_events().count(), 63);
    // Drained, there is room again; the last subscriber gone, nothing
    // queues and what waited is dropped.
    s.publish(b"ch", &mib, false);
    s.set_subscribers(false);
    assert_eq!(s.drain_events().count(), 0);
    s.publish(b"ch", &mib, false);
    assert_eq!(s.drain_events().count(), 0);
}

#[test]
fn snapshot_round_trips_every_type() {
    let mut s = Store::new();
    let mut z = ZSet::default();
    z.insert(b"m".to_vec(), Score::new(1.5).unwrap());
    let values = [
        Value::Str(b"v".to_vec()),
        Value::Hash([(b"f".to_vec(), b"x".to_vec())].into_iter().collect()),
        Value::List([b"a".to_vec(), b"b".to_vec()].into_iter().collect()),
        Value::Set([b"a".to_vec()].into_iter().collect()),
        Value::ZSet(z),
    ];
    for (i, v) in values.iter().enumerate() {
        s.applied = i as u64 + 1;
        s.put(&[b'k', i as u8], v.clone(), (i == 2).then_some(99));
    }
    s.applied += 1;
    s.put(b"gone", Value::Str(b"x".to_vec()), None);
    s.applied += 1;
    s.remove(b"gone");
    let b = s.snapshot();
    let r = Store::restore(&b).expect("restore");
    assert_eq!(r.snapshot(), b);
    // The tombstone travels: WATCH of the removed key reads the same.
    assert_eq!(r.version(b"gone", 0), s.version(b"gone", 0));
    assert_eq!(r.version(b"gone", 0), ABSENT | s.applied);
    for (i, v) in values.iter().enumerate() {
        assert_eq!(r.value(&[b'k', i as u8], 0), Some(v));
        assert_eq!(r.version(&[b'k', i as u8], 0), i as u64 + 1);
    }
    for cut in 0..b.len() {
        assert!(Store::restore(&b[..cut]).is_err());
    }
}
