//! One client connection of the event loop: its session, parser, reply
//! bytes and the queue of requests waiting for an outcome, and the RESP3
//! shaping of its replies ([`Shape`]).

use super::{Deferred, Registry, MAX_QUEUED, OUT_HIGH};
use crate::client_list::ClientFacts;
use crate::dispatch::ReadCmd;
use crate::op::{WriteCmd, WriteOp};
use crate::pubsub::Kind;
use crate::resp::{decode_reply, Command, Parser, Reply};
use crate::session::Session;
use crate::txn::Step;
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// What an unanswered request waits for.
pub(super) enum Slot {
    /// Its write to be applied.
    Write,
    /// The read barrier of a group of requests answered from the store
    /// together (attempt `tries` of [`READ_RETRIES`]); `ready` once the
    /// barrier is through and the rest of the group waits only for the
    /// loop's answer budget ([`super::ANSWER_BUDGET`]).
    Read {
        group: Vec<Query>,
        tries: usize,
        ready: bool,
    },
    /// Its membership change to be applied.
    Member,
    /// A `PUBLISH` (or `SPUBLISH`: [`Kind::Shard`]) to this channel to be
    /// applied (its reply counts this member's receivers then).
    Publish(Vec<u8>, Kind),
    /// A blocking command waiting for its keys, its timeout or
    /// `CLIENT UNBLOCK` (see `super::blocking`); nothing later on the
    /// connection runs meanwhile.
    Blocked,
    /// Nothing: the reply is ready, behind an earlier one that is not.
    Done(Vec<u8>),
}

/// A request answered from the store once its read barrier is through.
pub(super) enum Ask {
    /// A read.
    Read(ReadCmd),
    /// A write the store showed would change nothing
    /// ([`crate::store::Store::unchanged_reply`]): answered like a read if
    /// it still would when its barrier is through, proposed if not.
    Write(WriteOp),
}

/// One request of a read group, with the RESP3 shape of its reply.
pub(super) struct Query {
    pub(super) ask: Ask,
    pub(super) shape: Option<Box<Shape>>,
    /// Its reply is not sent (`CLIENT REPLY OFF|SKIP`).
    pub(super) silent: bool,
}

impl Query {
    /// Whether it waits for a read barrier on a connection that is (not)
    /// `READONLY`; a write always does.
    pub(super) fn needs_barrier(&self, readonly: bool) -> bool {
        match &self.ask {
            Ask::Read(cmd) => cmd.needs_barrier() && !readonly,
            Ask::Write(_) => true,
        }
    }

    /// Appends `reply` to `out` in the connection's protocol (nothing if it
    /// is silent).
    pub(super) fn encode(&self, reply: Reply, out: &mut Vec<u8>) {
        if self.silent {
            return;
        }
        match &self.shape {
            Some(s) => s.encode(reply, out),
            None => reply.encode(out),
        }
    }
}

pub(super) struct Pending {
    pub(super) token: u64,
    pub(super) slot: Slot,
    /// Its reply is not sent (`CLIENT REPLY OFF|SKIP`).
    pub(super) silent: bool,
    /// On a RESP3 connection: the command its reply is shaped by.
    pub(super) shape: Option<Box<Shape>>,
}

/// For a RESP3 connection (`HELLO 3`): the command a reply answers, which
/// decides the reply's RESP3 shape ([`crate::resp3`]).
#[derive(Clone)]
pub(super) struct Shape {
    pub(super) args: Command,
    /// For `EXEC`: the queued commands' words.
    pub(super) queued: Vec<Command>,
}

impl Shape {
    pub(super) fn of(args: &Command, step: Option<&Step>) -> Box<Shape> {
        let queued = match step {
            Some(Step::Exec(op)) => match &op.cmd {
                WriteCmd::Exec { cmds, .. } => cmds
                    .iter()
                    .map(|c| match c {
                        WriteCmd::Data { args, .. } | WriteCmd::Query { args, .. } => args.clone(),
                        _ => Vec::new(),
                    })
                    .collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        Box::new(Shape {
            args: args.clone(),
            queued,
        })
    }

    pub(super) fn encode(&self, reply: Reply, out: &mut Vec<u8>) {
        crate::resp3::shape(&self.args, &self.queued, reply).encode_resp3(out);
    }

    /// A reply encoded as RESP2 (a write's from the state machine, a
    /// read's), re-encoded for this command in RESP3.
    pub(super) fn convert(&self, bytes: Vec<u8>) -> Vec<u8> {
        match decode_reply(&bytes) {
            Ok(Some((r, n))) if n == bytes.len() => {
                let mut out = Vec::with_capacity(bytes.len() + 8);
                self.encode(r, &mut out);
                out
            }
            _ => bytes,
        }
    }
}

/// Pub/sub frames for a RESP3 connection: each top-level array becomes a
/// push (`>`), as Redis sends subscription replies and messages.
fn to_push(mut bytes: Vec<u8>) -> Vec<u8> {
    let mut at = 0;
    while at < bytes.len() {
        match decode_reply(&bytes[at..]) {
            Ok(Some((_, n))) => {
                if bytes[at] == b'*' {
                    bytes[at] = b'>';
                }
                at += n;
            }
            _ => break,
        }
    }
    bytes
}

pub(super) struct Conn {
    pub(super) link: super::link::Link,
    pub(super) parser: Parser,
    pub(super) session: Session,
    /// `MULTI`/`EXEC`/`WATCH` state.
    pub(super) txn: crate::txn::Txn,
    /// Reply bytes not yet written.
    pub(super) out: Vec<u8>,
    /// Unanswered requests, oldest first.
    pub(super) queue: VecDeque<Pending>,
    /// A read barrier waits in `queue`: nothing later starts, but reads
    /// (and writes that would change nothing) may join its group while
    /// `joinable`.
    pub(super) read_waiting: bool,
    /// The waiting read barrier started in this pump of the connection: a
    /// request already received may join its group (its read index is
    /// taken after the request arrived). Cleared when the pump ends.
    pub(super) joinable: bool,
    /// A read group not started yet: it waits for the earlier replies.
    pub(super) deferred: Option<Deferred>,
    /// A command taken from the parser that could not join the read group
    /// ahead of it: it runs once that group is answered.
    pub(super) held: Option<Command>,
    /// `QUIT` or a protocol error: close once `out` is written.
    pub(super) quit: bool,
    /// The client closed its side: close once everything is answered.
    pub(super) eof: bool,
    /// Commands may wait in the parser: the last pump stopped on a stall or
    /// the turn's budget, not on an empty parser.
    pub(super) more: bool,
    /// The epoll events registered now.
    pub(super) interest: u32,
    /// Listed in `ClientLoop::dirty`.
    pub(super) dirty: bool,
    /// On a RESP3 connection: the command being answered now.
    pub(super) shape: Option<Box<Shape>>,
    /// When it connected, and when it last sent bytes (`CLIENT LIST`).
    pub(super) since: Instant,
    pub(super) last_input: Instant,
    /// The first word of its last command (`CLIENT LIST`'s `cmd`).
    pub(super) last_cmd: Vec<u8>,
    /// A blocking command of it waits (a [`Slot::Blocked`] request, or its
    /// serving write in flight).
    pub(super) blocked: bool,
    /// After `MONITOR`: it is sent every command the member runs.
    pub(super) monitor: bool,
    /// `CLIENT REPLY`.
    pub(super) replies: ReplyMode,
    /// Pushes ([`Conn::push`]) held while a read group waits in
    /// `deferred`: they go out after its replies.
    pub(super) held_pushes: Vec<u8>,
    /// Where its unsent bytes stand against its output buffer limit.
    pub(super) output_watch: crate::limits::OutputWatch,
}

/// Which replies a connection gets (`CLIENT REPLY`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum ReplyMode {
    /// Every reply.
    #[default]
    On,
    /// None.
    Off,
    /// None for this many more commands, then every reply again.
    Skip(u8),
}

impl Conn {
    pub(super) fn stalled(&self) -> bool {
        self.quit
            || self.blocked
            || self.read_waiting
            || self.deferred.is_some()
            || self.queue.len() >= MAX_QUEUED
            || self.out.len() >= OUT_HIGH
    }

    /// Whether the command being answered gets its reply (`CLIENT REPLY`).
    pub(super) fn take_reply(&mut self) -> bool {
        match self.replies {
            ReplyMode::On => true,
            ReplyMode::Off => false,
            ReplyMode::Skip(n) => {
                self.replies = match n {
                    0 | 1 => ReplyMode::On,
                    n => ReplyMode::Skip(n - 1),
                };
                false
            }
        }
    }

    /// Queues a reply behind the pending ones (or straight out), in the
    /// connection's protocol.
    pub(super) fn emit(&mut self, reply: &Reply) {
        if !self.take_reply() {
            return;
        }
        if let Some(s) = &self.shape {
            let mut b = Vec::new();
            s.encode(reply.clone(), &mut b);
            self.emit_encoded(b);
        } else if self.queue.is_empty() {
            reply.encode(&mut self.out);
        } else {
            self.queue.push_back(Pending {
                token: 0,
                slot: Slot::Done(reply.to_bytes()),
                silent: false,
                shape: None,
            });
        }
    }

    /// Queues pub/sub frames (replies and messages) the same way: pushes
    /// on a RESP3 connection.
    pub(super) fn emit_bytes(&mut self, bytes: Vec<u8>) {
        let bytes = if self.session.resp3 {
            to_push(bytes)
        } else {
            bytes
        };
        self.emit_encoded(bytes);
    }

    pub(super) fn emit_encoded(&mut self, bytes: Vec<u8>) {
        if self.queue.is_empty() {
            self.out.extend_from_slice(&bytes);
        } else {
            self.queue.push_back(Pending {
                token: 0,
                slot: Slot::Done(bytes),
                silent: false,
                shape: None,
            });
        }
    }

    /// Queues an out-of-band push (a tracking invalidation) after the
    /// replies of every request received so far, as Redis sends an
    /// invalidation after the reply of the command that caused it (a read
    /// that expired a key it met, a transaction). Held while a read group
    /// waits in `deferred`, until [`Conn::release_pushes`].
    pub(super) fn push(&mut self, bytes: Vec<u8>) {
        if self.deferred.is_some() {
            self.held_pushes.extend_from_slice(&bytes);
        } else {
            self.emit_encoded(bytes);
        }
    }

    /// Once no read group waits in `deferred`: the held pushes go behind
    /// the replies queued so far.
    pub(super) fn release_pushes(&mut self) {
        if self.deferred.is_none() && !self.held_pushes.is_empty() {
            let b = std::mem::take(&mut self.held_pushes);
            self.emit_encoded(b);
        }
    }

    /// Whether the request about to be taken may join a read group: the
    /// deferred one, or the one whose barrier just started.
    pub(super) fn joining(&self) -> bool {
        matches!(self.deferred, Some(Deferred::Reads(_))) || (self.read_waiting && self.joinable)
    }

    /// Adds `q` to the read group it may join ([`Conn::joining`]); false
    /// (and `q` dropped: the request is taken again later) when that group
    /// is full.
    pub(super) fn join(&mut self, q: Query) -> bool {
        let group = match &mut self.deferred {
            Some(Deferred::Reads(g)) => g,
            _ => match self.queue.back_mut() {
                Some(Pending {
                    slot: Slot::Read { group, .. },
                    ..
                }) => group,
                _ => return false,
            },
        };
        if group.len() >= MAX_QUEUED {
            return false;
        }
        group.push(q);
        true
    }

    /// Queues a request that waits for `slot`'s outcome.
    pub(super) fn wait(&mut self, token: u64, slot: Slot) {
        let shape = self.shape.clone();
        let silent = !self.take_reply();
        self.queue.push_back(Pending {
            token,
            slot,
            silent,
            shape,
        });
    }

    /// What `CLIENT LIST` says of it.
    pub(super) fn facts(&self, id: u64, subs: &Registry, now: Instant) -> ClientFacts {
        let (sub, psub, ssub) = subs.counts(id);
        ClientFacts {
            id: self.session.id,
            addr: self.link.tcp().peer_addr().ok(),
            laddr: self.link.tcp().local_addr().ok(),
            fd: self.link.as_raw_fd(),
            name: self.session.name.clone(),
            age_s: now.duration_since(self.since).as_secs(),
            idle_s: now.duration_since(self.last_input).as_secs(),
            multi: self.txn.queued(),
            sub,
            psub,
            ssub,
            monitor: self.monitor,
            readonly: self.session.readonly,
            qbuf: self.parser.buffered(),
            obl: self.out.len(),
            cmd: String::from_utf8_lossy(&self.last_cmd).to_ascii_lowercase(),
            resp: if self.session.resp3 { 3 } else { 2 },
            user: String::from_utf8_lossy(self.session.user_name()).into_owned(),
        }
    }

    /// Moves the ready replies at the head of the queue out.
    pub(super) fn release(&mut self) {
        while let Some(Pending {
            slot: Slot::Done(_),
            ..
        }) = self.queue.front()
        {
            if let Some(Pending {
                slot: Slot::Done(b),
                silent,
                ..
            }) = self.queue.pop_front()
            {
                if !silent {
                    self.out.extend_from_slice(&b);
                }
            }
        }
    }
}
