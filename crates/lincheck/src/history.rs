//! Concurrent histories: operations with invocation/response times, and a recorder that
//! builds them while a test runs.

/// How an operation ended, as seen by its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<O> {
    /// The client got `output` at time `at` (inclusive upper bound of the operation's
    /// interval).
    Returned {
        /// Response time (same clock as [`Operation::call`]).
        at: u64,
        /// What the client observed.
        output: O,
    },
    /// The client never learned the outcome (timeout, crash of the server it talked to,
    /// or an "indeterminate" error): the operation may have taken effect at any point
    /// after its invocation, or never. Like Knossos' `:info` / Porcupine's pending calls.
    Unknown,
}

/// One client operation of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation<I, O> {
    /// The client (process) that issued it; informational only (the checker uses times).
    pub client: u64,
    /// What was asked.
    pub input: I,
    /// Invocation time. Any monotonic clock shared by all clients works; equal times are
    /// treated as concurrent (calls sort before returns at the same instant).
    pub call: u64,
    /// How it ended.
    pub outcome: Outcome<O>,
}

impl<I, O> Operation<I, O> {
    /// A completed operation.
    pub fn returned(client: u64, input: I, call: u64, output: O, at: u64) -> Self {
        Operation {
            client,
            input,
            call,
            outcome: Outcome::Returned { at, output },
        }
    }

    /// An operation with unknown outcome.
    pub fn unknown(client: u64, input: I, call: u64) -> Self {
        Operation {
            client,
            input,
            call,
            outcome: Outcome::Unknown,
        }
    }

    /// The observed output, `None` if unknown.
    pub fn output(&self) -> Option<&O> {
        match &self.outcome {
            Outcome::Returned { output, .. } => Some(output),
            Outcome::Unknown => None,
        }
    }

    /// The response time, `None` if unknown.
    pub fn returned_at(&self) -> Option<u64> {
        match &self.outcome {
            Outcome::Returned { at, .. } => Some(*at),
            Outcome::Unknown => None,
        }
    }
}

/// Handle of an operation inside a [`HistoryRecorder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpHandle(pub usize);

/// Why a [`HistoryRecorder`] call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The handle was not issued by this recorder.
    #[error("unknown operation handle {0}")]
    UnknownHandle(usize),
    /// The operation was already completed, failed or abandoned.
    #[error("operation {0} already closed")]
    AlreadyClosed(usize),
    /// The response time precedes the invocation time.
    #[error("operation {handle} returns at {at} before its call at {call}")]
    ReturnBeforeCall {
        /// Handle.
        handle: usize,
        /// Invocation time.
        call: u64,
        /// Offending response time.
        at: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Open,
    Done,
    Failed,
    Abandoned,
}

/// Records a history while clients run: [`invoke`](HistoryRecorder::invoke) when a call is
/// issued, then exactly one of [`complete`](HistoryRecorder::complete) (a response),
/// [`fail`](HistoryRecorder::fail) (definitely had no effect; dropped from the history) or
/// [`abandon`](HistoryRecorder::abandon) (unknown outcome). Operations still open at
/// [`finish`](HistoryRecorder::finish) become unknown.
#[derive(Debug, Clone)]
pub struct HistoryRecorder<I, O> {
    ops: Vec<(Operation<I, O>, Slot)>,
}

impl<I, O> Default for HistoryRecorder<I, O> {
    fn default() -> Self {
        HistoryRecorder { ops: Vec::new() }
    }
}

impl<I, O> HistoryRecorder<I, O> {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an invocation at time `at`.
    pub fn invoke(&mut self, client: u64, input: I, at: u64) -> OpHandle {
        self.ops
            .push((Operation::unknown(client, input, at), Slot::Open));
        OpHandle(self.ops.len() - 1)
    }

    fn open(&mut self, h: OpHandle) -> Result<&mut (Operation<I, O>, Slot), RecordError> {
        let slot = self
            .ops
            .get_mut(h.0)
            .ok_or(RecordError::UnknownHandle(h.0))?;
        if slot.1 != Slot::Open {
            return Err(RecordError::AlreadyClosed(h.0));
        }
        Ok(slot)
    }

    /// Records the response `output` at time `at`.
    pub fn complete(&mut self, h: OpHandle, output: O, at: u64) -> Result<(), RecordError> {
        let slot = self.open(h)?;
        if at < slot.0.call {
            return Err(RecordError::ReturnBeforeCall {
                handle: h.0,
                call: slot.0.call,
                at,
            });
        }
        slot.0.outcome = Outcome::Returned { at, output };
        slot.1 = Slot::Done;
        Ok(())
    }

    /// The operation definitely did not take effect (e.g. rejected before entering the
    /// log); it is left out of the history.
    pub fn fail(&mut self, h: OpHandle) -> Result<(), RecordError> {
        self.open(h)?.1 = Slot::Failed;
        Ok(())
    }

    /// The client gave up without knowing the outcome.
    pub fn abandon(&mut self, h: OpHandle) -> Result<(), RecordError> {
        self.open(h)?.1 = Slot::Abandoned;
        Ok(())
    }

    /// True if `h` is still open.
    pub fn is_open(&self, h: OpHandle) -> bool {
        self.ops.get(h.0).is_some_and(|s| s.1 == Slot::Open)
    }

    /// Number of operations recorded (including failed ones).
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The history: completed and unknown-outcome operations, failed ones left out.
    pub fn finish(self) -> Vec<Operation<I, O>> {
        self.ops
            .into_iter()
            .filter(|(_, s)| *s != Slot::Failed)
            .map(|(op, _)| op)
            .collect()
    }
}
