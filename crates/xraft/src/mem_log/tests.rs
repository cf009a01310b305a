use protobuf::Message as _;

use super::*;
use raft::{GetEntriesContext, Storage, StorageError as RaftStorageError};

fn ent(index: u64, term: u64) -> Entry {
    Entry {
        index,
        term,
        data: vec![index as u8; 3].into(),
        ..Default::default()
    }
}

fn ents(from: u64, terms: &[u64]) -> Vec<Entry> {
    terms
        .iter()
        .enumerate()
        .map(|(i, t)| ent(from + i as u64, *t))
        .collect()
}

fn hs(term: u64, vote: u64, commit: u64) -> HardState {
    HardState {
        term,
        vote,
        commit,
        ..Default::default()
    }
}

fn voters(ids: &[u64]) -> ConfState {
    ConfState {
        voters: ids.to_vec(),
        ..Default::default()
    }
}

/// A raft read's outcome, its error named.
fn read<T>(r: raft::Result<T>) -> Result<T, &'static str> {
    r.map_err(|e| match e {
        raft::Error::Store(RaftStorageError::Compacted) => "compacted",
        raft::Error::Store(RaftStorageError::Unavailable) => "unavailable",
        raft::Error::Store(RaftStorageError::SnapshotTemporarilyUnavailable) => {
            "snapshot unavailable"
        }
        _ => "other",
    })
}

fn snap(index: u64, term: u64, voters: &[u64]) -> Snapshot {
    let mut s = Snapshot::default();
    s.mut_metadata().index = index;
    s.mut_metadata().term = term;
    s.mut_metadata().mut_conf_state().voters = voters.to_vec();
    s.data = vec![index as u8].into();
    s
}

/// The terms of the live entries, from the first one.
fn terms(log: &MemLog) -> Vec<u64> {
    let first = log.first_index().unwrap();
    let last = log.last_index().unwrap();
    (first..=last).map(|i| log.term(i).unwrap()).collect()
}

/// A log holding entries 1..=5 of terms 1, 1, 2, 2, 3, synced.
fn five() -> (MemDisk, MemLog) {
    let disk = MemDisk::new();
    let (mut log, report) = MemLog::open(&disk);
    assert_eq!(report, MemOpenReport::default());
    log.append(&ents(1, &[1, 1, 2, 2, 3])).unwrap();
    log.sync().unwrap();
    (disk, log)
}

#[derive(Debug, PartialEq)]
enum Outcome {
    Ok,
    Gap,
    OutOfRange,
}

fn outcome(r: Result<(), WriteError>) -> Outcome {
    match r {
        Ok(()) => Outcome::Ok,
        Err(WriteError::Gap { .. }) => Outcome::Gap,
        Err(WriteError::OutOfRange { .. }) => Outcome::OutOfRange,
        Err(e) => panic!("unexpected {e}"),
    }
}

/// Appends onto entries 1..=5 (compacted up to `compact` first): raft's
/// overwrite semantics, and refusals that leave the log as it was.
#[test]
fn append_table() {
    type Row = (
        &'static str,
        u64,
        u64,
        &'static [u64],
        Outcome,
        &'static [u64],
    );
    let rows: &[Row] = &[
        // (name, compact to, first index, terms, outcome, terms after)
        ("extend", 0, 6, &[3, 4], Outcome::Ok, &[1, 1, 2, 2, 3, 3, 4]),
        ("nothing", 0, 6, &[], Outcome::Ok, &[1, 1, 2, 2, 3]),
        (
            "overwrite the tail",
            0,
            5,
            &[4],
            Outcome::Ok,
            &[1, 1, 2, 2, 4],
        ),
        ("replace from 3", 0, 3, &[5], Outcome::Ok, &[1, 1, 5]),
        ("replace all", 0, 1, &[6, 6], Outcome::Ok, &[6, 6]),
        ("a gap", 0, 7, &[3], Outcome::Gap, &[1, 1, 2, 2, 3]),
        ("after compaction", 2, 3, &[7], Outcome::Ok, &[7]),
        (
            "onto compacted",
            2,
            2,
            &[7, 7],
            Outcome::OutOfRange,
            &[2, 2, 3],
        ),
    ];
    for (name, compact, first, new_terms, want, after) in rows {
        let (_disk, mut log) = five();
        if *compact > 0 {
            log.compact_with_snapshot(snap(*compact, 1, &[1])).unwrap();
        }
        let got = outcome(log.append(&ents(*first, new_terms)));
        assert_eq!(got, *want, "{name}");
        assert_eq!(terms(&log), *after, "{name}");
    }
}

/// What raft reads from a log compacted up to 2 holding 3..=5.
#[test]
fn reads_table() {
    let (_disk, mut log) = five();
    log.compact_with_snapshot(snap(2, 1, &[1])).unwrap();
    assert_eq!(log.first_index().unwrap(), 3);
    assert_eq!(log.last_index().unwrap(), 5);
    let term_rows = [
        (1, Err("compacted")),
        (2, Ok(1)),
        (3, Ok(2)),
        (5, Ok(3)),
        (6, Err("unavailable")),
    ];
    for (idx, want) in term_rows {
        assert_eq!(read(log.term(idx)), want, "term({idx})");
    }
    let one = ent(3, 2).compute_size() as u64;
    // (low, high, max size) -> indexes, or the error
    type Row = (u64, u64, Option<u64>, Result<Vec<u64>, &'static str>);
    let entry_rows: [Row; 7] = [
        (3, 6, None, Ok(vec![3, 4, 5])),
        (4, 5, None, Ok(vec![4])),
        (3, 6, Some(one), Ok(vec![3])),
        (3, 6, Some(0), Ok(vec![3])),
        (2, 4, None, Err("compacted")),
        (4, 7, None, Err("unavailable")),
        (5, 4, None, Err("unavailable")),
    ];
    for (low, high, max, want) in entry_rows {
        let got = read(log.entries(low, high, max, GetEntriesContext::empty(false)))
            .map(|v| v.iter().map(|e| e.index).collect::<Vec<_>>());
        assert_eq!(got, want, "entries({low}, {high}, {max:?})");
    }
}

/// Compaction takes a snapshot after the compacted part and within the log.
#[test]
fn compaction_table() {
    // (name, compact first, then at, outcome, compacted index, live entries)
    let rows = [
        ("at the last entry", 0, 5, Outcome::Ok, 5, 0),
        ("in the middle", 0, 3, Outcome::Ok, 3, 2),
        ("past the log", 0, 6, Outcome::OutOfRange, 0, 5),
        ("at zero", 0, 0, Outcome::OutOfRange, 0, 5),
        ("again at the base", 3, 3, Outcome::OutOfRange, 3, 2),
        ("behind the base", 3, 2, Outcome::OutOfRange, 3, 2),
        ("after the base", 3, 4, Outcome::Ok, 4, 1),
    ];
    for (name, first, at, want, base, live) in rows {
        let (_disk, mut log) = five();
        if first > 0 {
            log.compact_with_snapshot(snap(first, 2, &[1])).unwrap();
        }
        let term = log.term(at).unwrap_or(0);
        let got = outcome(log.compact_with_snapshot(snap(at, term, &[1])));
        assert_eq!(got, want, "{name}");
        assert_eq!(log.compacted_index(), base, "{name}");
        assert_eq!(log.entry_count(), live, "{name}");
        if want == Outcome::Ok {
            assert_eq!(read(log.term(at)), Ok(term), "{name}");
            assert_eq!(log.appended_bytes(), 0, "{name}");
        }
    }
}

/// A crash loses what was recorded after the last sync and keeps what was
/// synced; a flush is no durability point.
#[test]
fn crash_keeps_only_what_was_synced() {
    let disk = MemDisk::new();
    {
        let (mut log, _) = MemLog::open(&disk);
        log.append(&ents(1, &[1, 1, 1])).unwrap();
        log.append(&ents(3, &[2])).unwrap();
        log.set_hard_state(&hs(2, 1, 2)).unwrap();
        log.set_conf_state(1, &voters(&[1, 2, 3])).unwrap();
        log.sync().unwrap();
        // Recorded, flushed, never synced.
        log.append(&ents(4, &[2, 2])).unwrap();
        log.append(&ents(2, &[3])).unwrap();
        log.set_hard_state(&hs(3, 0, 4)).unwrap();
        log.set_conf_state(4, &ConfState::default()).unwrap();
        log.flush().unwrap();
        assert_eq!(terms(&log), [1, 3]);
    }
    let (log, report) = MemLog::open(&disk);
    assert_eq!(
        report,
        MemOpenReport {
            entries: 3,
            snapshot_loaded: false
        }
    );
    assert_eq!(terms(&log), [1, 1, 2]);
    assert_eq!(log.hard_state(), &hs(2, 1, 2));
    assert_eq!(log.conf_state().voters, [1, 2, 3]);
    assert!(log.is_initialized());
    assert_eq!(log.appended_bytes(), 9);
    // A second crash right after reopening loses nothing more.
    drop(log);
    let (log, _) = MemLog::open(&disk);
    assert_eq!(terms(&log), [1, 1, 2]);
}

/// A snapshot, taken or received, makes the whole live state durable at once
/// (the disk log's checkpoint), unsynced records included.
#[test]
fn snapshots_are_durable_at_once() {
    let (disk, mut log) = five();
    log.append(&ents(6, &[3, 3])).unwrap();
    log.set_hard_state(&hs(3, 1, 6)).unwrap();
    log.compact_with_snapshot(snap(4, 2, &[1, 2])).unwrap();
    drop(log);
    let (mut log, report) = MemLog::open(&disk);
    assert!(report.snapshot_loaded);
    assert_eq!(report.entries, 3);
    assert_eq!(log.compacted_index(), 4);
    assert_eq!(terms(&log), [3, 3, 3]);
    assert_eq!(log.hard_state(), &hs(3, 1, 6));
    assert_eq!(log.conf_state().voters, [1, 2]);
    // A leader's snapshot replaces the log and raises term and commit.
    log.apply_snapshot(snap(10, 5, &[1, 2, 3])).unwrap();
    assert_eq!(
        outcome(log.apply_snapshot(snap(9, 5, &[1]))),
        Outcome::OutOfRange
    );
    drop(log);
    let (log, _) = MemLog::open(&disk);
    assert_eq!(log.compacted_index(), 10);
    assert_eq!(log.last_index_value(), 10);
    assert_eq!(log.hard_state(), &hs(5, 1, 10));
    assert_eq!(log.conf_state().voters, [1, 2, 3]);
    assert_eq!(
        log.latest_snapshot().map(|s| s.get_metadata().index),
        Some(10)
    );
}

/// Raft asks for a snapshot the log lacks: the node is told to take one.
#[test]
fn missing_snapshot_is_wanted() {
    let (_disk, mut log) = five();
    assert_eq!(read(log.snapshot(1, 2)).err(), Some("snapshot unavailable"));
    assert!(log.take_snapshot_wanted());
    assert!(!log.take_snapshot_wanted());
    log.compact_with_snapshot(snap(3, 2, &[1])).unwrap();
    assert_eq!(
        read(log.snapshot(3, 2)).map(|s| s.get_metadata().index),
        Ok(3)
    );
    // Staler than the membership: wanted again.
    log.set_conf_state(4, &ConfState::default()).unwrap();
    assert!(log.snapshot(3, 2).is_err());
    assert!(log.take_snapshot_wanted());
}

/// A snapshot prepared on another thread installs as a compaction, or not at
/// all once the log moved past it.
#[test]
fn prepared_snapshots_install_unless_overtaken() {
    let (_disk, mut log) = five();
    let writer = log.snapshot_writer();
    let prepared = std::thread::spawn(move || writer.write(snap(3, 2, &[1])))
        .join()
        .unwrap()
        .unwrap();
    log.install_prepared(prepared).unwrap();
    assert_eq!(log.compacted_index(), 3);
    let late = log.snapshot_writer().write(snap(4, 2, &[1])).unwrap();
    log.apply_snapshot(snap(8, 4, &[1])).unwrap();
    assert_eq!(outcome(log.install_prepared(late)), Outcome::OutOfRange);
    assert_eq!(log.compacted_index(), 8);
}
