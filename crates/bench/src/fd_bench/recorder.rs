//! What part 2 records while it runs: every runner's alive-table events.

use std::time::{Duration, Instant};
use xlane_fd::{AliveTable, Event, EventCursor, Status};

/// One runner's alive table as the benchmark follows it.
pub(super) struct Observer {
    pub(super) table: AliveTable,
    pub(super) cursor: EventCursor,
}

/// What part 2 records while it runs.
pub(super) struct Recorder {
    pub(super) observers: Vec<Observer>,
    pub(super) events: Vec<(usize, Event)>,
    pub(super) missed: u64,
}

impl Recorder {
    pub(super) fn poll(&mut self) {
        for (i, o) in self.observers.iter_mut().enumerate() {
            let events = &mut self.events;
            self.missed += o.cursor.for_each(&o.table, |e| events.push((i, *e)));
        }
    }

    /// Polls for `d`.
    pub(super) fn poll_for(&mut self, d: Duration) {
        let end = Instant::now() + d;
        loop {
            self.poll();
            if Instant::now() >= end {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Replaces host `h`'s table (a restarted runner), reading the old one
    /// to its end first.
    pub(super) fn replace(&mut self, h: usize, table: AliveTable) {
        self.poll();
        self.observers[h] = Observer {
            cursor: table.subscribe_from(0),
            table,
        };
    }

    /// `true` when every runner trusts every other host.
    fn all_alive(&self) -> bool {
        self.observers.iter().all(|o| {
            let s = o.table.snapshot();
            s.unreadable.is_empty()
                && !s.peers.is_empty()
                && s.peers.iter().all(|p| p.status == Status::Alive)
        })
    }

    /// Waits until every runner trusts every other host.
    pub(super) fn wait_all_alive(&mut self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            self.poll();
            if self.all_alive() {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub(super) fn describe_status(&self) -> String {
        let mut out = Vec::new();
        for (i, o) in self.observers.iter().enumerate() {
            let s = o.table.snapshot();
            let st: Vec<String> = s
                .peers
                .iter()
                .map(|p| format!("{}={:?}", p.addr.ip(), p.status))
                .collect();
            out.push(format!("h{i}: [{}]", st.join(", ")));
        }
        out.join("; ")
    }
}
