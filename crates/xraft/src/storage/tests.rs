use super::*;
use raft::{GetEntriesContext, Storage, StorageError as RaftStorageError};

fn ent(index: u64, term: u64, data: &[u8]) -> Entry {
    let mut e = Entry::default();
    e.index = index;
    e.term = term;
    e.data = data.to_vec().into();
    e
}

fn cfg(dir: &Path) -> StorageConfig {
    StorageConfig {
        dir: dir.to_path_buf(),
        fsync: FsyncPolicy::Batch,
        segment_bytes: 1 << 20,
    }
}

fn hs(term: u64, vote: u64, commit: u64) -> HardState {
    let mut h = HardState::default();
    h.term = term;
    h.vote = vote;
    h.commit = commit;
    h
}

#[test]
fn append_overwrite_reopen() {
    let d = tempfile::tempdir().unwrap();
    {
        let (mut s, r) = DiskStorage::open(cfg(d.path())).unwrap();
        assert!(r.torn_tail.is_none());
        s.append(&[ent(1, 1, b"a"), ent(2, 1, b"b"), ent(3, 1, b"c")])
            .unwrap();
        s.append(&[ent(2, 2, b"B")]).unwrap();
        s.set_hard_state(&hs(2, 1, 2)).unwrap();
        s.sync().unwrap();
        assert!(matches!(
            s.append(&[ent(5, 2, b"x")]),
            Err(WriteError::Gap { .. })
        ));
    }
    let (s, _) = DiskStorage::open(cfg(d.path())).unwrap();
    assert_eq!(s.last_index().unwrap(), 2);
    assert_eq!(s.term(2).unwrap(), 2);
    assert_eq!(s.hard_state(), &hs(2, 1, 2));
    let es = s
        .entries(1, 3, None, GetEntriesContext::empty(false))
        .unwrap();
    assert_eq!(&es[1].data[..], b"B");
}

/// The records of one Ready reach the segment in one write, at the flush: before it
/// the file is as it was (and a reopen finds none of them), after it every record.
#[test]
fn records_wait_for_the_flush() {
    let d = tempfile::tempdir().unwrap();
    let (mut s, _) = DiskStorage::open(cfg(d.path())).unwrap();
    let seg = d.path().join(seg_name(1));
    let before = fs::metadata(&seg).unwrap().len();
    s.append(&[ent(1, 1, b"a"), ent(2, 1, b"b")]).unwrap();
    s.set_hard_state(&hs(1, 1, 2)).unwrap();
    assert_eq!(
        s.last_index().unwrap(),
        2,
        "the in-memory view has them at once"
    );
    assert_eq!(fs::metadata(&seg).unwrap().len(), before);
    let (early, _) = DiskStorage::open(cfg(d.path())).unwrap();
    assert_eq!(early.last_index().unwrap(), 0);
    drop(early);
    s.flush().unwrap();
    let after = fs::read(&seg).unwrap();
    let mut at = before as usize;
    let mut kinds = Vec::new();
    while let Parsed::Record { kind, next, .. } = parse_record(&after, at) {
        kinds.push(kind);
        at = next;
    }
    assert_eq!(kinds, [K_ENTRY, K_ENTRY, K_HARD]);
    assert_eq!(at, after.len());
    drop(s);
    let (s, _) = DiskStorage::open(cfg(d.path())).unwrap();
    assert_eq!(s.last_index().unwrap(), 2);
    assert_eq!(s.hard_state(), &hs(1, 1, 2));
}

#[test]
fn compaction_and_snapshot_survive_reopen() {
    let d = tempfile::tempdir().unwrap();
    {
        let (mut s, _) = DiskStorage::open(cfg(d.path())).unwrap();
        let es: Vec<Entry> = (1..=10).map(|i| ent(i, 1, &[i as u8])).collect();
        s.append(&es).unwrap();
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = 6;
        snap.mut_metadata().term = 1;
        snap.mut_metadata().mut_conf_state().voters = vec![1, 2, 3];
        snap.data = b"state@6".to_vec().into();
        s.compact_with_snapshot(snap).unwrap();
        assert_eq!(s.first_index().unwrap(), 7);
        assert!(matches!(
            s.entries(5, 8, None, GetEntriesContext::empty(false)),
            Err(raft::Error::Store(RaftStorageError::Compacted))
        ));
        s.append(&[ent(11, 2, b"z")]).unwrap();
        s.sync().unwrap();
    }
    let (s, r) = DiskStorage::open(cfg(d.path())).unwrap();
    assert!(r.snapshot_loaded);
    assert_eq!(r.segments, 1);
    assert_eq!(s.first_index().unwrap(), 7);
    assert_eq!(s.last_index().unwrap(), 11);
    assert_eq!(s.term(6).unwrap(), 1);
    assert_eq!(&s.snapshot(0, 2).unwrap().data[..], b"state@6");
    assert_eq!(s.conf_state().voters, vec![1, 2, 3]);
}

#[test]
fn snapshot_newer_than_checkpoint_is_reconciled() {
    let d = tempfile::tempdir().unwrap();
    let snap_bytes;
    {
        let (mut s, _) = DiskStorage::open(cfg(d.path())).unwrap();
        let es: Vec<Entry> = (1..=5).map(|i| ent(i, 1, &[i as u8])).collect();
        s.append(&es).unwrap();
        s.sync().unwrap();
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = 3;
        snap.mut_metadata().term = 1;
        let mut buf = Vec::new();
        encode_record(K_SNAP, &snap.write_to_bytes().unwrap(), &mut buf);
        snap_bytes = buf;
    }
    // Simulate a crash after the snapshot rename but before the checkpoint.
    fs::write(d.path().join("snapshot"), &snap_bytes).unwrap();
    let (s, _) = DiskStorage::open(cfg(d.path())).unwrap();
    assert_eq!(s.first_index().unwrap(), 4);
    assert_eq!(s.last_index().unwrap(), 5);
    assert_eq!(s.hard_state().commit, 3);
}

/// Crash recovery: truncate a small log at every offset; each must open, report a torn
/// tail exactly when the cut is inside a record, and recover a prefix of the entries.
#[test]
fn truncate_at_every_offset() {
    let d = tempfile::tempdir().unwrap();
    let all: Vec<Entry> = (1..=6)
        .map(|i| ent(i, 1 + i / 3, &vec![i as u8; i as usize * 3]))
        .collect();
    {
        let (mut s, _) = DiskStorage::open(cfg(d.path())).unwrap();
        for e in &all {
            s.append(std::slice::from_ref(e)).unwrap();
        }
        s.set_hard_state(&hs(3, 2, 4)).unwrap();
        s.sync().unwrap();
    }
    let seg = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .unwrap();
    let full = fs::read(&seg).unwrap();
    let name = seg.file_name().unwrap().to_owned();
    let mut boundaries = vec![0u64];
    let mut at = 0;
    while let Parsed::Record { next, .. } = parse_record(&full, at) {
        boundaries.push(next as u64);
        at = next;
    }
    assert_eq!(at, full.len());
    for cut in 0..=full.len() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join(&name), &full[..cut]).unwrap();
        let (mut s, r) =
            DiskStorage::open(cfg(t.path())).unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        let on_boundary = boundaries.contains(&(cut as u64));
        assert_eq!(
            r.torn_tail.is_none(),
            on_boundary,
            "cut {cut}: {:?}",
            r.torn_tail
        );
        let n = s.entry_count();
        let got = s.entries(1, n as u64 + 1, None, GetEntriesContext::empty(false));
        if n > 0 {
            assert_eq!(got.unwrap(), all[..n].to_vec(), "cut {cut}");
        }
        let complete = cut == full.len();
        assert_eq!(s.hard_state() == &hs(3, 2, 4), complete, "cut {cut}");
        // The log remains appendable after recovery.
        s.append(&[ent(n as u64 + 1, 9, b"after")]).unwrap();
        s.sync().unwrap();
        drop(s);
        let (s, r) = DiskStorage::open(cfg(t.path())).unwrap();
        assert!(r.torn_tail.is_none(), "cut {cut}");
        assert_eq!(s.last_index().unwrap(), n as u64 + 1);
    }
}

#[test]
fn corrupt_middle_segment_is_error_and_rotation_replays() {
    let d = tempfile::tempdir().unwrap();
    let mut c = cfg(d.path());
    c.segment_bytes = 64;
    {
        let (mut s, _) = DiskStorage::open(c.clone()).unwrap();
        for i in 1..=20 {
            s.append(&[ent(i, 1, &[0u8; 20])]).unwrap();
            s.sync().unwrap();
        }
    }
    let (s, r) = DiskStorage::open(c.clone()).unwrap();
    assert!(r.segments > 2);
    assert_eq!(s.last_index().unwrap(), 20);
    drop(s);
    let mut segs: Vec<PathBuf> = fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segs.sort();
    let mid = &segs[1];
    let mut b = fs::read(mid).unwrap();
    b[REC_HEADER + 2] ^= 0xff;
    fs::write(mid, b).unwrap();
    assert!(matches!(
        DiskStorage::open(c),
        Err(OpenError::Corrupt { .. })
    ));
}

/// Under `everysec` every Ready's records are written at its sync (a process crash
/// loses none of them) whether or not the fsync is due; `sync_now` fsyncs them.
#[test]
fn everysec_writes_every_sync_and_syncs_on_demand() {
    let d = tempfile::tempdir().unwrap();
    let mut c = cfg(d.path());
    c.fsync = FsyncPolicy::EverySec;
    {
        let (mut s, _) = DiskStorage::open(c.clone()).unwrap();
        for i in 1..=3 {
            s.append(&[ent(i, 1, b"x")]).unwrap();
            s.sync().unwrap();
            s.sync_due().unwrap();
        }
        s.set_hard_state(&hs(1, 1, 3)).unwrap();
        s.sync_now().unwrap();
        assert!(!s.dirty);
    }
    let (s, _) = DiskStorage::open(c).unwrap();
    assert_eq!(s.last_index().unwrap(), 3);
    assert_eq!(s.hard_state(), &hs(1, 1, 3));
}

#[test]
fn fsync_policies_parse() {
    for (name, want) in [
        ("always", FsyncPolicy::Always),
        ("batch", FsyncPolicy::Batch),
        ("everysec", FsyncPolicy::EverySec),
        ("never", FsyncPolicy::Never),
    ] {
        assert_eq!(name.parse::<FsyncPolicy>(), Ok(want));
    }
    assert_eq!(
        "sometimes".parse::<FsyncPolicy>(),
        Err(UnknownFsyncPolicy("sometimes".into()))
    );
}

/// A record sealed behind its payload has the layout the reader expects:
/// length and kind where `parse_record` looks, a CRC it accepts, and a
/// payload it gives back; one changed payload byte is caught.
#[test]
fn sealed_record_parses_back() {
    for payload in [&b""[..], b"x", &[7u8; 300], b"entry bytes"] {
        let mut out = vec![1, 2, 3];
        encode_record(K_ENTRY, payload, &mut out);
        assert_eq!(out.len(), 3 + REC_HEADER + payload.len());
        assert_eq!(out[3..7], (payload.len() as u32).to_le_bytes());
        assert_eq!(out[3 + 8], K_ENTRY);
        match parse_record(&out, 3) {
            Parsed::Record {
                kind,
                payload: p,
                next,
            } => {
                assert_eq!((kind, p, next), (K_ENTRY, payload, out.len()));
            }
            _ => panic!("sealed record does not parse"),
        }
        if !payload.is_empty() {
            let last = out.len() - 1;
            out[last] ^= 1;
            assert!(matches!(parse_record(&out, 3), Parsed::Bad(_)));
        }
    }
}
