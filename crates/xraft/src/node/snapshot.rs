//! Snapshots of a [`RaftNode`]: taken at the applied index, encoded and written on a
//! thread of their own from the state machine's copy, installed by a later Ready.

use std::sync::mpsc;

use raft::eraftpb::Snapshot;

use super::{RaftNode, ReadyError, StateMachine};
use crate::log_store::{LogStore, SnapshotWrite, WriteError};

impl<S: StateMachine, L: LogStore> RaftNode<S, L> {
    /// The snapshot's metadata at the applied index (`None` if nothing new was
    /// applied since the last one).
    fn snapshot_meta(&self) -> Result<Option<Snapshot>, ReadyError> {
        let applied = self.applied;
        if applied <= self.raw.store().compacted_index() {
            return Ok(None);
        }
        let term = self.raw.store().term(applied)?;
        let mut snap = Snapshot::default();
        snap.mut_metadata().index = applied;
        snap.mut_metadata().term = term;
        snap.mut_metadata()
            .set_conf_state(self.raw.store().conf_state().clone());
        Ok(Some(snap))
    }

    /// Forces a snapshot + compaction at the applied index, on this thread (no-op if
    /// nothing new applied).
    pub fn snapshot_now(&mut self) -> Result<(), ReadyError> {
        if let Some(mut snap) = self.snapshot_meta()? {
            snap.data = self.sm.snapshot().into();
            self.raw.mut_store().compact_with_snapshot(snap)?;
        }
        Ok(())
    }

    /// Starts a snapshot at the applied index: the state machine's copy
    /// ([`StateMachine::snapshot_job`]) is serialized and written on a thread of its
    /// own, and installed by a later Ready, so that the node's thread never stalls
    /// for the size of the state (a stalled leader sends no heartbeats). On this
    /// thread if no thread can be started.
    pub(super) fn start_snapshot(&mut self) -> Result<(), ReadyError> {
        if !self.cfg.snapshot_thread {
            return self.snapshot_now();
        }
        let Some(mut snap) = self.snapshot_meta()? else {
            return Ok(());
        };
        let job = self.sm.snapshot_job();
        let writer = self.raw.store().snapshot_writer();
        let (tx, rx) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name("xraft-snapshot".into())
            .spawn(move || {
                snap.data = job().into();
                let _ = tx.send(writer.write(snap));
            });
        match spawned {
            Ok(_) => {
                self.snapshotting = Some(rx);
                Ok(())
            }
            Err(_) => self.snapshot_now(),
        }
    }

    /// Installs the snapshot the snapshot thread finished, if it has. One the log
    /// moved past meanwhile (a leader's snapshot came) is dropped.
    pub(super) fn install_finished_snapshot(&mut self) -> Result<(), ReadyError> {
        let Some(rx) = &self.snapshotting else {
            return Ok(());
        };
        let done = match rx.try_recv() {
            Ok(done) => done,
            Err(mpsc::TryRecvError::Empty) => return Ok(()),
            Err(mpsc::TryRecvError::Disconnected) => {
                self.snapshotting = None;
                return Ok(());
            }
        };
        self.snapshotting = None;
        match self.raw.mut_store().install_prepared(done?) {
            Ok(()) | Err(WriteError::OutOfRange { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether a snapshot is being written on its own thread.
    pub fn snapshot_in_progress(&self) -> bool {
        self.snapshotting.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{NodeConfig, SnapshotJob};
    use crate::storage::DiskStorage;

    /// Counts applied ops; its (first) snapshot job waits for the test's go.
    struct Gated {
        applied: u64,
        gate: std::sync::Mutex<Option<mpsc::Receiver<()>>>,
    }

    impl StateMachine for Gated {
        fn apply(&mut self, _index: u64, _op: &[u8]) -> Vec<u8> {
            self.applied += 1;
            Vec::new()
        }
        fn snapshot(&self) -> Vec<u8> {
            self.applied.to_le_bytes().to_vec()
        }
        fn restore(&mut self, data: &[u8]) {
            let mut b = [0u8; 8];
            b.copy_from_slice(&data[..8]);
            self.applied = u64::from_le_bytes(b);
        }
        fn snapshot_job(&self) -> SnapshotJob {
            let bytes = self.snapshot();
            let gate = self.gate.lock().unwrap().take();
            Box::new(move || {
                if let Some(g) = gate {
                    let _ = g.recv();
                }
                bytes
            })
        }
    }

    /// A single voter under `cfg` (one op per batch, a fixed election
    /// seed), on a fresh directory, led; its state machine's snapshot job
    /// waits for `gate` if given.
    fn single_voter(
        cfg: NodeConfig,
        gate: Option<mpsc::Receiver<()>>,
    ) -> (tempfile::TempDir, RaftNode<Gated>) {
        let dir = tempfile::tempdir().unwrap();
        let (st, _) = DiskStorage::open(crate::StorageConfig {
            dir: dir.path().to_path_buf(),
            fsync: crate::FsyncPolicy::Never,
            segment_bytes: 1 << 20,
        })
        .unwrap();
        let sm = Gated {
            applied: 0,
            gate: std::sync::Mutex::new(gate),
        };
        let cfg = NodeConfig {
            max_batch_ops: 1,
            election_seed: Some(7),
            ..cfg
        };
        let tick = cfg.tick_ns;
        let mut node = RaftNode::new(cfg, st, sm, &[1]).unwrap();
        let mut now = 0;
        while !node.is_leader() {
            now += tick;
            node.tick_to(now);
            node.handle_ready().unwrap();
            assert!(now < 1000 * tick, "a single voter never led");
        }
        (dir, node)
    }

    /// A snapshot is serialized on its own thread: the node goes on applying
    /// while it is written, and a later Ready installs it with the state as of
    /// the index it was started at.
    #[test]
    fn snapshots_are_written_beside_the_node() {
        let (go, gate) = mpsc::channel();
        let cfg = NodeConfig {
            snapshot_interval: 5,
            ..NodeConfig::new(1)
        };
        let (dir, mut node) = single_voter(cfg, Some(gate));
        // Propose until the snapshot starts (its job now blocks).
        let mut started_at = None;
        for _ in 0..20 {
            node.propose(b"op".to_vec()).unwrap();
            node.handle_ready().unwrap();
            if node.snapshot_in_progress() {
                started_at = Some((node.applied_index(), node.state_machine().applied));
                break;
            }
        }
        let (index, ops) = started_at.expect("no snapshot started");
        let before = node.storage().compacted_index();
        assert!(before < index);
        // The node applies on while the job waits; nothing is compacted yet.
        for _ in 0..10 {
            node.propose(b"op".to_vec()).unwrap();
            node.handle_ready().unwrap();
        }
        assert!(node.snapshot_in_progress());
        assert_eq!(node.storage().compacted_index(), before);
        assert_eq!(node.state_machine().applied, ops + 10);
        go.send(()).unwrap();
        let mut turns = 0;
        while node.storage().compacted_index() == before {
            std::thread::sleep(std::time::Duration::from_millis(1));
            node.handle_ready().unwrap();
            turns += 1;
            assert!(turns < 10_000, "the snapshot was never installed");
        }
        assert_eq!(node.storage().compacted_index(), index);
        let snap = node.storage().latest_snapshot().expect("a snapshot");
        assert_eq!(snap.get_metadata().index, index);
        assert_eq!(&snap.data[..], &ops.to_le_bytes()[..]);
        // The next one (10 more applied) is taken as of its own start.
        while node.snapshot_in_progress() {
            std::thread::sleep(std::time::Duration::from_millis(1));
            node.handle_ready().unwrap();
            turns += 1;
            assert!(turns < 20_000, "the snapshot was never installed");
        }
        let index = node.storage().compacted_index();
        let snap = node.storage().latest_snapshot().expect("a snapshot");
        assert_eq!(&snap.data[..], &(ops + 10).to_le_bytes()[..]);
        // Only the installed snapshot's file is left, and it reopens.
        drop(node);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
        let (st, report) = DiskStorage::open(crate::StorageConfig {
            dir: dir.path().to_path_buf(),
            fsync: crate::FsyncPolicy::Never,
            segment_bytes: 1 << 20,
        })
        .unwrap();
        assert!(report.snapshot_loaded);
        assert_eq!(st.compacted_index(), index);
    }
    /// Large entries start a snapshot by their bytes, long before their
    /// count would: the log kept in memory stays near its bound.
    #[test]
    fn large_entries_start_a_snapshot_by_their_bytes() {
        let cfg = NodeConfig {
            snapshot_interval: 10_000,
            snapshot_log_bytes: 1 << 20,
            ..NodeConfig::new(1)
        };
        let (_dir, mut node) = single_voter(cfg, None);
        // 64 KiB entries: 200 of them are 12.5 MiB, far fewer than 10 000.
        let mut most = 0;
        for i in 0..200 {
            node.propose(vec![i as u8; 64 << 10]).unwrap();
            node.handle_ready().unwrap();
            most = most.max(node.storage().appended_bytes());
        }
        let mut turns = 0;
        while node.snapshot_in_progress() {
            std::thread::sleep(std::time::Duration::from_millis(1));
            node.handle_ready().unwrap();
            turns += 1;
            assert!(turns < 20_000, "the snapshot was never installed");
        }
        assert!(node.storage().compacted_index() > 0, "no snapshot by size");
        assert!(node.storage().entry_count() < 200);
        // Bounded: what is appended while one snapshot is written, beyond
        // the bound, is one snapshot's worth at most.
        assert!(most < 8 << 20, "{most} bytes appended without a snapshot");
    }
}
