//! The shared-memory files: liveness counter, alive table, event ring.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use xlane_fd::shm::{EntryError, TableStats};
use xlane_fd::{
    AliveTable, Event, EventItem, EventKind, LivenessCounter, ModelKind, PeerView, Reason,
    ShmError, Status, TableConfig, TableWriter,
};

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "xlane-fd-test-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&p).expect("mkdir");
        TempDir(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cfg(capacity: usize, events: usize) -> TableConfig {
    TableConfig {
        capacity,
        event_capacity: events,
        period_ns: 1_000_000,
        threshold: 250_000.0,
        stall_periods: Some(5),
        model: ModelKind::TimeoutArrival,
        self_addr: Some(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 4000)),
        created_ns: 42,
    }
}

fn view(i: usize, n: u64) -> PeerView {
    PeerView {
        index: i,
        addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2 + i as u8), 4000 + i as u16),
        tunnel: 7 + i as u32,
        status: if n % 2 == 0 {
            Status::Alive
        } else {
            Status::Suspected(Reason::Stalled)
        },
        heartbeats: n,
        last_rx_ns: Some(n * 10),
        last_send_ns: (n % 3 != 0).then_some(n * 10 + 1),
        last_seq: Some(n),
        incarnation: Some(99),
        counter: (n % 5 != 0).then_some(n * 2),
        counter_changed_ns: Some(n * 10 + 5),
        deadline_ns: Some(n * 10 + 1500),
        max_level: Some(n as f64 * 0.5),
        suspicions: n / 7,
    }
}

#[test]
fn counter_create_open_bump() {
    let d = TempDir::new("counter");
    let p = d.path("sub/app.counter");
    let a = LivenessCounter::open_or_create(&p).expect("create");
    let b = LivenessCounter::open_or_create(&p).expect("open existing");
    assert_eq!(a.read(), 0);
    assert_eq!(a.bump(11), 1);
    assert_eq!(a.bump(12), 2);
    assert_eq!(b.read(), 2);
    assert_eq!(b.last_bump_ns(), 12);
    let c = LivenessCounter::open(&p).expect("open");
    assert_eq!(c.read(), 2);
    // No leftover temporary files.
    let names: Vec<_> = std::fs::read_dir(d.path("sub"))
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
}

#[test]
fn counter_refusals() {
    let d = TempDir::new("counter-bad");
    let small = d.path("small");
    std::fs::write(&small, [0u8; 10]).expect("write");
    assert!(matches!(
        LivenessCounter::open(&small),
        Err(ShmError::TooSmall { .. })
    ));
    let magic = d.path("magic");
    std::fs::write(&magic, [0u8; 64]).expect("write");
    assert!(matches!(
        LivenessCounter::open(&magic),
        Err(ShmError::Magic { .. })
    ));
    let ver = d.path("ver");
    let mut b = [0u8; 64];
    b[..8].copy_from_slice(b"XLFDCNT1");
    b[8] = 9;
    std::fs::write(&ver, b).expect("write");
    assert!(matches!(
        LivenessCounter::open(&ver),
        Err(ShmError::Version { found: 9, .. })
    ));
    assert!(matches!(
        LivenessCounter::open(d.path("absent")),
        Err(ShmError::Io { .. })
    ));
}

#[test]
fn table_round_trip() {
    let d = TempDir::new("table");
    let p = d.path("fd.table");
    let mut w = TableWriter::create(&p, &cfg(4, 8)).expect("create");
    let t = AliveTable::open(&p).expect("open");
    assert_eq!(t.len(), 0);
    assert_eq!(t.info().capacity, 4);
    assert_eq!(t.info().stall_periods, Some(5));
    assert_eq!(t.info().model, Some(ModelKind::TimeoutArrival));
    assert_eq!(t.info().self_addr, w.info().self_addr);
    assert_eq!(t.info().writer_pid, std::process::id());
    for n in [0u64, 1, 3, 5, 10, 15] {
        for i in 0..3 {
            assert!(w.set_peer(&view(i, n + i as u64)));
            assert_eq!(t.entry(i), Ok(view(i, n + i as u64)));
        }
    }
    let mut unknown = view(3, 0);
    unknown.status = Status::Unknown;
    unknown.last_rx_ns = None;
    unknown.last_send_ns = None;
    unknown.last_seq = None;
    unknown.incarnation = None;
    unknown.counter = None;
    unknown.counter_changed_ns = None;
    unknown.deadline_ns = None;
    unknown.max_level = None;
    assert!(w.set_peer(&unknown));
    assert!(!w.set_peer(&view(4, 1)), "index beyond capacity");
    assert_eq!(t.len(), 4);
    assert_eq!(t.entry(3), Ok(unknown));
    assert_eq!(t.entry(4), Err(EntryError::OutOfRange(4)));
    let stats = TableStats {
        accepted: 1,
        unknown_sender: 2,
        unknown_tunnel: 3,
        replay: 4,
        malformed: 5,
        events_dropped: 6,
        heartbeats_sent: 7,
        send_errors: 8,
    };
    w.set_stats(&stats);
    w.touch(777);
    let s = t.snapshot();
    assert_eq!(s.peers.len(), 4);
    assert_eq!(s.stats, stats);
    assert_eq!(s.updated_ns, 777);
    assert!(!s.closed);
    assert_eq!(t.find(view(1, 0).addr).map(|v| v.index), Some(1));
    drop(w);
    assert!(t.is_closed());
}

#[test]
fn table_refusals() {
    let d = TempDir::new("table-bad");
    let p = d.path("fd.table");
    drop(TableWriter::create(&p, &cfg(2, 4)).expect("create"));
    let good = std::fs::read(&p).expect("read");
    type Check = fn(&ShmError) -> bool;
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        ("short", good[..100].to_vec(), |e| {
            matches!(e, ShmError::TooSmall { .. })
        }),
        ("truncated body", good[..4096 + 10].to_vec(), |e| {
            matches!(e, ShmError::TooSmall { .. })
        }),
        (
            "magic",
            {
                let mut b = good.clone();
                b[0] ^= 1;
                b
            },
            |e| matches!(e, ShmError::Magic { .. }),
        ),
        (
            "version",
            {
                let mut b = good.clone();
                b[8] = 2;
                b
            },
            |e| matches!(e, ShmError::Version { found: 2, .. }),
        ),
        (
            "period bit flipped (checksum)",
            {
                let mut b = good.clone();
                b[7 * 8] ^= 0x10;
                b
            },
            |e| matches!(e, ShmError::Corrupt { .. }),
        ),
    ];
    for (name, bytes, ok) in cases {
        let f = d.path(name);
        std::fs::write(&f, &bytes).expect("write");
        match AliveTable::open(&f) {
            Err(e) => assert!(ok(&e), "{name}: {e}"),
            Ok(_) => panic!("{name}: opened"),
        }
    }
    assert!(matches!(
        TableWriter::create(d.path("x"), &cfg(2, 0)),
        Err(ShmError::EventCapacity(0))
    ));
}

fn ev(n: u64) -> Event {
    Event {
        number: n,
        peer: (n % 3) as usize,
        addr: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), n as u16),
        at_ns: 1000 + n,
        kind: match n % 4 {
            0 => EventKind::Joined,
            1 => EventKind::Suspected(Reason::Silent),
            2 => EventKind::Suspected(Reason::Stalled),
            _ => EventKind::Recovered,
        },
    }
}

#[test]
fn event_ring_cursor_and_missed() {
    let d = TempDir::new("events");
    let p = d.path("fd.table");
    let mut w = TableWriter::create(&p, &cfg(1, 4)).expect("create");
    let t = AliveTable::open(&p).expect("open");
    let mut from_start = t.subscribe_from(0);
    assert_eq!(from_start.next_item(&t), None);
    for n in 0..3 {
        assert_eq!(w.push_event(&ev(n)), n);
    }
    let mut late = t.subscribe();
    assert_eq!(late.position(), 3);
    let got: Vec<EventItem> = from_start.iter(&t).collect();
    assert_eq!(
        got,
        (0..3).map(|n| EventItem::Event(ev(n))).collect::<Vec<_>>()
    );
    // Ten more: the ring keeps four; `late` missed six of them.
    for n in 3..13 {
        w.push_event(&ev(n));
    }
    let mut seen = vec![];
    let missed = late.for_each(&t, |e| seen.push(e.number));
    assert_eq!(missed, 6);
    assert_eq!(seen, vec![9, 10, 11, 12]);
    assert_eq!(late.next_item(&t), None);
    w.push_event(&ev(13));
    assert_eq!(late.next_item(&t), Some(EventItem::Event(ev(13))));
    assert_eq!(t.events_published(), 14);
}

#[test]
fn replaced_table_is_complete_for_new_readers() {
    let d = TempDir::new("replace");
    let p = d.path("fd.table");
    let mut w1 = TableWriter::create(&p, &cfg(2, 4)).expect("create");
    w1.set_peer(&view(0, 1));
    let old = AliveTable::open(&p).expect("open");
    let mut w2 = TableWriter::create(&p, &cfg(3, 4)).expect("replace");
    w2.set_peer(&view(2, 8));
    let new = AliveTable::open(&p).expect("open new");
    assert_eq!(old.info().capacity, 2);
    assert_eq!(old.entry(0), Ok(view(0, 1)));
    assert_eq!(new.info().capacity, 3);
    assert_eq!(new.entry(2), Ok(view(2, 8)));
}

/// A writer thread rewrites one entry as fast as it can, every field derived
/// from one number; readers must never see a mix of two updates.
#[test]
fn seqlock_reads_are_never_torn() {
    let d = TempDir::new("seqlock");
    let p = d.path("fd.table");
    let mut w = TableWriter::create(&p, &cfg(1, 1024)).expect("create");
    w.set_peer(&view(0, 2));
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let writer = std::thread::spawn(move || {
        let mut n = 2u64;
        while !s2.load(Ordering::Relaxed) {
            n += 1;
            w.set_peer(&view(0, n));
            if n % 64 == 0 {
                w.push_event(&ev(n));
            }
        }
        n
    });
    let t = AliveTable::open(&p).expect("open");
    let mut cursor = t.subscribe_from(0);
    let mut reads = 0u64;
    let mut last_event = None;
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(300) {
        match t.entry(0) {
            Ok(v) => {
                assert_eq!(v, view(0, v.heartbeats), "torn read");
                reads += 1;
            }
            Err(EntryError::Busy(_)) => {}
            Err(e) => panic!("{e}"),
        }
        while let Some(item) = cursor.next_item(&t) {
            if let EventItem::Event(e) = item {
                // Each event is whole (all fields from the same push) and in order.
                let n = e.at_ns - 1000;
                assert_eq!(
                    e,
                    Event {
                        number: e.number,
                        ..ev(n)
                    }
                );
                if let Some(prev) = last_event {
                    assert!(e.number > prev);
                }
                last_event = Some(e.number);
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let n = writer.join().expect("writer");
    assert!(reads > 100, "only {reads} reads");
    assert!(n > 100, "only {n} writes");
}
