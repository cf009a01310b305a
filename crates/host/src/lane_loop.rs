//! One event loop per lane core: every tunnel end placed on the core is
//! served by one thread.
//!
//! X-Lane's lane core runs one thread for all the tunnels of its host. A
//! [`LaneLoop`] is that thread's work, as a library type:
//!
//! - **Senders** ([`SenderSpec`]): a [`PeriodicSender`](xlane_lane::PeriodicSender) core, a socket and
//!   its destinations. All senders' slots share one timer, armed for the
//!   earliest due slot. At its slot a sender's [`SlotFill`] may enqueue
//!   chunks, the core builds the frame, the send time is stamped right
//!   before the system call, and one `sendmmsg` carries the copies to every
//!   destination. An event-driven sender ([`SlotFill::send_when_free`])
//!   sends instead as soon as chunks wait and its window is free, and a
//!   frame may go to some of its destinations only ([`SlotFill::to`]).
//! - **Receivers** ([`ReceiverSpec`]): a [`PeriodicReceiver`](xlane_lane::PeriodicReceiver) core and a
//!   socket, and optionally the lane's own receive ring
//!   ([`crate::xdp::XdpRings`]: AF_XDP sockets fed by the XDP steering
//!   program). All receiving sockets (of every emulated host: a socket
//!   keeps the network namespace it was made in) and rings sit in one epoll
//!   set; a ready socket is read with `recvmmsg`, a ready ring by taking its
//!   descriptors, and every datagram goes to its core with its receive
//!   stamp first, before its bytes are looked at. Accepted frames and their
//!   chunks go to the end's [`FrameSink`] (or the sink takes the datagram
//!   itself, [`FrameSink::on_datagram`]: X-FD's detector, which tells its
//!   peers apart by source address).
//! - **Deadlines** of a sink ([`FrameSink::poll_timeout`]): the loop wakes
//!   for them as for a slot and calls [`FrameSink::on_timeout`] after the
//!   turn's reads, saying whether they emptied every ready socket (X-FD
//!   judges a peer's silence only then).
//!
//! **Polling** ([`WaitMode::BusyPoll`], for a lane core of its own): each
//! turn sends what is due, looks at every AF_XDP ring directly (the rings
//! are shared memory, so a frame waiting there is taken without a system
//! call; the kernel is woken only when a ring's `need_wakeup` flag asks for
//! it) and then at the sockets through an `epoll_wait` that does not block.
//! [`LoopStats::idle_turns`] counts the turns that found nothing to do.
//!
//! **Bounded work per turn** ([`LaneLoop::poll`]): every due sender sends at
//! most one frame (at most [`crate::batch::SEND_BATCH`] copies per system
//! call), then at most [`MAX_EVENTS`] ready sockets or AF_XDP rings are
//! read, each at most [`RECV_BUDGET`] datagrams (in batches of
//! [`crate::batch::RECV_BATCH`]). A socket with more waiting stays ready
//! (epoll is level-triggered) and is read again next turn. So a turn handles
//! at most `senders + MAX_EVENTS × RECV_BUDGET` datagrams.
//!
//! **Authenticated frames** (optional, per end): a sender with a
//! [`SenderSpec::seal`] appends a MAC trailer ([`xlane_auth`]) to every
//! frame after its send time is stamped; a receiver with a
//! [`ReceiverSpec::open`] checks it before its core sees the frame, and
//! counts a refusal in [`RecvReport::unauthenticated`].
//!
//! **No allocation in the loop**: the frame buffer, the receive batch and
//! the epoll event array are allocated when the loop is made; adding or
//! removing a tunnel end allocates (it is not the real-time path).
//!
//! **Two ways to drive it.** [`LaneLoop::run`] is the lane thread: it waits
//! in `epoll_wait` (or spins, [`WaitMode::BusyPoll`]) until a socket is
//! ready or the timer (a `timerfd` on `CLOCK_REALTIME`, absolute) reaches
//! the earliest slot, then polls. Another event loop can embed it instead:
//! wait on [`LaneLoop::fd`] (readable when a receiving socket is) until
//! [`LaneLoop::next_deadline`], then call [`LaneLoop::poll`] with the time.
//! Tunnel ends can be added and removed between polls, or from another
//! thread while [`LaneLoop::run`] runs, through a [`Control`].

use crate::batch::RecvBatch;
use crate::budget::{InstructionCounter, ThreadUsage};
use crate::epoll::Epoll;
use crate::runtime::{RecvReport, SendReport, WaitMode};
use crate::socket::{realtime_ns, RxStamps, StampSource};
use crate::xdp::XdpRings;
use std::io;
use std::net::SocketAddrV4;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use xlane_auth::{seal_if_keyed, Sealer, ANY_RECEIVER, TRAILER_LEN};
use xlane_lane::Destinations;
use xlane_wire::MAX_FRAME_LEN;

mod control;
mod ends;
pub use control::Control;
use control::{Command, ControlShared};
pub use ends::{
    FrameSink, ReceiverEnd, ReceiverId, ReceiverSpec, SenderEnd, SenderId, SenderSpec, SlotFill,
    XdpId, XdpSend,
};

/// Ready sockets handled per turn.
pub const MAX_EVENTS: usize = 32;
/// Datagrams read from one socket per turn.
pub const RECV_BUDGET: usize = 64;
/// Transmit stamps read per due sender whose socket has them on
/// ([`SlotFill::tx_stamp`]).
pub const TX_STAMP_READS: usize = 4;
/// Longest wait of [`LaneLoop::run`] between two looks at its stop flag.
pub const MAX_WAIT_NS: u64 = 20_000_000;

const TIMER_TOKEN: u64 = u64::MAX;
const CONTROL_TOKEN: u64 = u64::MAX - 1;
/// An AF_XDP path's queue: this bit, the queue in bits 32.., the path's
/// index in the low 32 bits.
const XDP_TOKEN: u64 = 1 << 62;

/// An AF_XDP path of the loop and the receivers it feeds (senders name
/// it in their [`XdpSend`]).
struct XdpPath {
    rings: XdpRings,
    /// (port, receiver index), one per receiver on the path.
    by_port: Vec<(u16, usize)>,
}

/// The loop's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LoopStats {
    /// Turns ([`LaneLoop::poll`] calls).
    pub turns: u64,
    /// Waits that slept in `epoll_wait` ([`LaneLoop::run`] only).
    pub sleeps: u64,
    /// Frames sent (each once, whatever its number of destinations).
    pub frames: u64,
    /// `sendmmsg` calls (a sender on an AF_XDP path: the wake-ups its
    /// transmit ring asked for).
    pub send_calls: u64,
    /// Datagrams read.
    pub datagrams: u64,
    /// `recvmmsg` calls that returned at least one datagram.
    pub recv_batches: u64,
    /// Turns that hit a socket's [`RECV_BUDGET`] (more was waiting).
    pub budget_hits: u64,
    /// Turns of a polling [`LaneLoop::run`] ([`WaitMode::BusyPoll`]) that
    /// found nothing to do: no frame due, nothing to read. Their share of
    /// the turns is the polling core's headroom.
    pub idle_turns: u64,
    /// The thread's CPU time and switches over [`LaneLoop::run`].
    pub thread: ThreadUsage,
    /// Instructions the thread retired over [`LaneLoop::run`] (`None`
    /// where the machine has no instruction counter).
    pub instructions: Option<u64>,
}

/// The lane core's event loop (see the module docs).
pub struct LaneLoop<F, S> {
    epoll: Epoll,
    timer: OwnedFd,
    armed_ns: u64,
    senders: Vec<Option<SenderEnd<F>>>,
    receivers: Vec<Option<ReceiverEnd<S>>>,
    paths: Vec<Option<XdpPath>>,
    ports: [u16; crate::batch::RECV_BATCH],
    frame: Box<[u8; MAX_FRAME_LEN + TRAILER_LEN]>,
    /// The destinations of a frame that goes to some of its sender's only.
    some_dsts: Vec<SocketAddrV4>,
    batch: Box<RecvBatch>,
    events: Box<[libc::epoll_event; MAX_EVENTS]>,
    control: Option<Arc<ControlShared<F, S>>>,
    stats: LoopStats,
}

/// One datagram to its receiver: counted, its MAC checked, then to the
/// core with its receive stamp first, and what the core accepts to the sink.
fn deliver<S: FrameSink>(r: &mut ReceiverEnd<S>, st: RxStamps, bytes: &[u8]) {
    let got = st.received;
    r.report.datagrams += 1;
    match got.source {
        StampSource::Hardware => r.report.hw_stamps += 1,
        StampSource::Kernel => r.report.kernel_stamps += 1,
        StampSource::User => {}
    }
    if got.truncated {
        r.report.truncated += 1;
    }
    // The MAC first: nothing unauthenticated reaches the core.
    let bytes = match r.spec.open.as_mut().map(|o| o.open(bytes, ANY_RECEIVER)) {
        None => bytes,
        Some(Ok(x)) => x.payload,
        Some(Err(_)) => {
            r.report.unauthenticated += 1;
            return;
        }
    };
    // Stamp first: the arrival time goes in before the bytes are looked at.
    if !r.spec.sink.on_datagram(&mut r.spec.core, &st, bytes) {
        r.report.refused += 1;
    }
}

/// Stamps a frame its core just built (`frame[..len]`, in a buffer with
/// room for a MAC trailer) with its send time, read here, right before the
/// caller's send system call, and seals it with that time when `seal` is
/// given; returns the length to send. Every lane send is stamped here, by
/// the loop's senders (socket and AF_XDP).
fn stamp_frame(frame: &mut [u8], len: usize, seal: Option<&mut Sealer>) -> usize {
    let t = realtime_ns();
    // The frame was just built by a core, so re-stamping cannot fail.
    let _ = xlane_wire::stamp_send_time(&mut frame[..len], t);
    seal_if_keyed(seal, frame, len, ANY_RECEIVER, t)
}

/// When sender `s` sends next: its slot, or, for a sender that sends when
/// its window is free, that window while chunks wait (else never).
fn due<F: SlotFill>(s: &SenderEnd<F>) -> u64 {
    if !s.spec.fill.send_when_free() {
        s.spec.core.poll_timeout()
    } else if s.spec.core.pending() > 0 {
        s.spec.core.clock().next_free()
    } else {
        u64::MAX
    }
}

/// The first free slot of a handle table (its end when none is free).
fn free_slot<T>(slots: &[Option<T>]) -> usize {
    slots
        .iter()
        .position(Option::is_none)
        .unwrap_or(slots.len())
}

/// Puts `x` in slot `i` of a handle table (`i` from [`free_slot`]).
fn put<T>(slots: &mut Vec<Option<T>>, i: usize, x: T) {
    if i == slots.len() {
        slots.push(Some(x));
    } else {
        slots[i] = Some(x);
    }
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl<F: SlotFill, S: FrameSink> LaneLoop<F, S> {
    /// An empty loop: its epoll set and its timer.
    pub fn new() -> io::Result<Self> {
        let epoll = Epoll::new()?;
        // SAFETY: a plain system call; the result is checked before use.
        let t = cvt(unsafe {
            libc::timerfd_create(libc::CLOCK_REALTIME, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
        })?;
        // SAFETY: t is a fresh descriptor we own.
        let timer = unsafe { OwnedFd::from_raw_fd(t) };
        let l = LaneLoop {
            epoll,
            timer,
            armed_ns: 0,
            senders: Vec::new(),
            receivers: Vec::new(),
            paths: Vec::new(),
            ports: [0; crate::batch::RECV_BATCH],
            frame: Box::new([0; MAX_FRAME_LEN + TRAILER_LEN]),
            some_dsts: Vec::with_capacity(xlane_lane::MAX_RECEIVERS),
            batch: Box::new(RecvBatch::new()),
            events: Box::new([libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS]),
            control: None,
            stats: LoopStats::default(),
        };
        l.watch(t, TIMER_TOKEN)?;
        Ok(l)
    }

    fn watch(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.epoll
            .ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, token)
    }

    /// A handle that adds and removes tunnel ends while another thread
    /// runs the loop (made on first call; its wake-up descriptor joins the
    /// epoll set).
    pub fn control(&mut self) -> io::Result<Control<F, S>> {
        if self.control.is_none() {
            let shared = Arc::new(ControlShared {
                queue: Mutex::new(Vec::new()),
                waker: crate::runtime::Waker::new()?,
            });
            self.watch(shared.waker.fd(), CONTROL_TOKEN)?;
            self.control = Some(shared);
        }
        Ok(Control {
            shared: self.control.clone().expect("set above"),
        })
    }

    /// Adds a sender; it sends from its core's first slot on.
    pub fn add_sender(&mut self, s: SenderSpec<F>) -> SenderId {
        let end = SenderEnd {
            spec: s,
            report: SendReport::default(),
        };
        let i = free_slot(&self.senders);
        put(&mut self.senders, i, end);
        SenderId(i)
    }

    /// Adds a receiver: its socket becomes non-blocking and joins the epoll set.
    pub fn add_receiver(&mut self, r: ReceiverSpec<S>) -> io::Result<ReceiverId> {
        r.sock.set_nonblocking()?;
        let i = free_slot(&self.receivers);
        if let Some(id) = r.xdp {
            let port = r
                .sock
                .local_addr()
                .map_err(|e| io::Error::other(e.to_string()))?
                .port();
            let path = self
                .paths
                .get_mut(id.0)
                .and_then(Option::as_mut)
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such XDP path"))?;
            path.rings
                .add_port(port)
                .map_err(|e| io::Error::other(e.to_string()))?;
            path.by_port.push((port, i));
        }
        if let Err(e) = self.watch(r.sock.as_raw_fd(), i as u64) {
            if let Some(id) = r.xdp {
                self.unclaim(id, i);
            }
            return Err(e);
        }
        let end = ReceiverEnd {
            spec: r,
            report: RecvReport::default(),
        };
        put(&mut self.receivers, i, end);
        Ok(ReceiverId(i))
    }

    /// Removes a sender and returns it.
    pub fn remove_sender(&mut self, id: SenderId) -> Option<SenderEnd<F>> {
        self.senders.get_mut(id.0)?.take()
    }

    /// Removes a receiver (its socket leaves the epoll set) and returns it.
    pub fn remove_receiver(&mut self, id: ReceiverId) -> Option<ReceiverEnd<S>> {
        let end = self.receivers.get_mut(id.0)?.take()?;
        self.unwatch(end.spec.sock.as_raw_fd());
        if let Some(x) = end.spec.xdp {
            self.unclaim(x, id.0);
        }
        Some(end)
    }

    /// Receiver `i` leaves path `id`: its port stops taking the ring unless
    /// another receiver on the path listens on it.
    fn unclaim(&mut self, id: XdpId, i: usize) {
        let Some(Some(path)) = self.paths.get_mut(id.0) else {
            return;
        };
        let Some(k) = path.by_port.iter().position(|&(_, r)| r == i) else {
            return;
        };
        let (port, _) = path.by_port.swap_remove(k);
        if path.by_port.iter().all(|&(p, _)| p != port) {
            path.rings.remove_port(port);
        }
    }

    /// Adds an AF_XDP path (opened on its interface, in its
    /// namespace): its queues join the epoll set. Receivers name it in
    /// [`ReceiverSpec::xdp`], senders in [`SenderSpec::xdp`].
    pub fn add_xdp(&mut self, rx: XdpRings) -> io::Result<XdpId> {
        let i = free_slot(&self.paths);
        for q in 0..rx.queues() {
            let Some(fd) = rx.fd(q) else { continue };
            if let Err(e) = self.watch(fd, XDP_TOKEN | (q as u64) << 32 | i as u64) {
                for fd in (0..q).filter_map(|q2| rx.fd(q2)) {
                    self.unwatch(fd);
                }
                return Err(e);
            }
        }
        let path = XdpPath {
            rings: rx,
            by_port: Vec::new(),
        };
        put(&mut self.paths, i, path);
        Ok(XdpId(i))
    }

    /// Removes an AF_XDP path once no receiver or sender uses it (else
    /// `None`, and it stays); dropping the returned path detaches its
    /// program.
    pub fn remove_xdp(&mut self, id: XdpId) -> Option<XdpRings> {
        let sending = self
            .senders
            .iter()
            .flatten()
            .any(|s| s.spec.xdp.as_ref().is_some_and(|x| x.path == id));
        let slot = self.paths.get_mut(id.0)?;
        if sending || !slot.as_ref()?.by_port.is_empty() {
            return None;
        }
        let path = slot.take()?;
        for fd in (0..path.rings.queues()).filter_map(|q| path.rings.fd(q)) {
            self.unwatch(fd);
        }
        Some(path.rings)
    }

    /// An AF_XDP path, by handle (for its counters).
    pub fn xdp(&mut self, id: XdpId) -> Option<&mut XdpRings> {
        Some(&mut self.paths.get_mut(id.0)?.as_mut()?.rings)
    }

    fn unwatch(&self, fd: RawFd) {
        self.epoll.remove(fd);
    }

    /// A sender, by handle.
    pub fn sender(&self, id: SenderId) -> Option<&SenderEnd<F>> {
        self.senders.get(id.0)?.as_ref()
    }

    /// A receiver, by handle.
    pub fn receiver(&self, id: ReceiverId) -> Option<&ReceiverEnd<S>> {
        self.receivers.get(id.0)?.as_ref()
    }

    /// A sender, by handle, to change its fill between turns.
    pub fn sender_mut(&mut self, id: SenderId) -> Option<&mut SenderEnd<F>> {
        self.senders.get_mut(id.0)?.as_mut()
    }

    /// A receiver, by handle, to reach its sink between turns.
    pub fn receiver_mut(&mut self, id: ReceiverId) -> Option<&mut ReceiverEnd<S>> {
        self.receivers.get_mut(id.0)?.as_mut()
    }

    /// Two receivers at once, by handle (`None` if either is missing or
    /// they are the same), for an end whose two sinks share state.
    pub fn receiver_pair_mut(
        &mut self,
        a: ReceiverId,
        b: ReceiverId,
    ) -> Option<(&mut ReceiverEnd<S>, &mut ReceiverEnd<S>)> {
        if a.0 == b.0 || a.0.max(b.0) >= self.receivers.len() {
            return None;
        }
        let (lo, hi) = self.receivers.split_at_mut(a.0.max(b.0));
        let (first, second) = (lo[a.0.min(b.0)].as_mut()?, hi[0].as_mut()?);
        Some(if a.0 < b.0 {
            (first, second)
        } else {
            (second, first)
        })
    }

    /// The descriptor an embedding loop waits on: readable when a receiving
    /// socket (or the timer, or a [`Control`] request) is.
    pub fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    /// The earliest slot of a sender that still has slots to send, or
    /// deadline of a receiver's sink (`CLOCK_REALTIME` ns).
    pub fn next_deadline(&self) -> Option<u64> {
        let slots = self.senders.iter().flatten().filter_map(|s| {
            let t = due(s);
            (t < s.spec.until_ns).then_some(t)
        });
        let sinks = self
            .receivers
            .iter()
            .flatten()
            .filter_map(|r| r.spec.sink.poll_timeout());
        slots.chain(sinks).min()
    }

    /// The loop's counters.
    pub fn stats(&self) -> LoopStats {
        self.stats
    }

    /// One turn at time `now` (see the module docs for its bounds): every
    /// due sender sends its frame ([`Self::send_due`]), then the ready
    /// sockets are read and due sinks called ([`Self::recv_due`]).
    pub fn poll(&mut self, now: u64) -> io::Result<()> {
        self.stats.turns += 1;
        self.send_due(now);
        self.recv_due(now)
    }

    /// The receiving half of a turn, for an embedding loop that reads at
    /// another point of its own turn than it sends: the ready sockets are
    /// read, then every sink whose deadline has come at `now` gets
    /// [`FrameSink::on_timeout`].
    pub fn recv_due(&mut self, now: u64) -> io::Result<()> {
        let n = match self.epoll.wait(&mut self.events[..], 0) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e),
        };
        let hits = self.stats.budget_hits;
        self.handle_events(n)?;
        // Every ready socket was seen and read to its end.
        self.sinks_due(now, n < MAX_EVENTS && self.stats.budget_hits == hits);
        Ok(())
    }

    /// The receiving half of a turn for an embedding loop that waits on
    /// the receivers' sockets itself (`ppoll` on each
    /// [`ReceiverSpec::sock`]) instead of on [`Self::fd`], and so knows
    /// which are readable without asking epoll: the receivers for which
    /// `ready` is true are read, then every sink whose deadline has come
    /// at `now` gets [`FrameSink::on_timeout`]. A receiver left out must
    /// have been empty at `now`. AF_XDP paths are not read here.
    pub fn recv_ready(&mut self, now: u64, ready: &dyn Fn(ReceiverId) -> bool) -> io::Result<()> {
        let hits = self.stats.budget_hits;
        for i in 0..self.receivers.len() {
            if self.receivers[i].is_some() && ready(ReceiverId(i)) {
                self.drain_receiver(i)?;
            }
        }
        self.sinks_due(now, self.stats.budget_hits == hits);
        Ok(())
    }

    /// Calls every sink whose deadline has come at `now`, saying whether
    /// the turn's reads emptied every ready socket.
    fn sinks_due(&mut self, now: u64, drained: bool) {
        for r in self.receivers.iter_mut().flatten() {
            if r.spec.sink.poll_timeout().is_some_and(|t| t <= now) {
                r.spec.sink.on_timeout(now, drained);
            }
        }
    }

    /// The sending half of a turn: every sender whose slot is due at `now`
    /// (on the clock its core's slots were set on), or whose window is free
    /// while chunks wait ([`SlotFill::send_when_free`]), sends at most one
    /// frame, its send time stamped right before the system call.
    pub fn send_due(&mut self, now: u64) {
        let frame = &mut self.frame[..];
        for s in self.senders.iter_mut().flatten() {
            let slot = due(s);
            if slot > now || slot >= s.spec.until_ns {
                continue;
            }
            if s.spec.sock.tx_timestamps() {
                // Bounded: a few error-queue reads, earlier frames' stamps.
                for _ in 0..TX_STAMP_READS {
                    match s.spec.sock.recv_tx_stamp() {
                        Ok(Some(st)) => s.spec.fill.tx_stamp(st),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
            s.spec.fill.fill(&mut s.spec.core, slot);
            let tx = if s.spec.fill.send_when_free() {
                match s.spec.core.transmit_now(now, frame) {
                    Ok(tx) => tx,
                    Err(_) => continue,
                }
            } else {
                match s.spec.core.poll_transmit(now, frame) {
                    Ok(Some(tx)) => tx,
                    // Nothing to send this slot, or a refusal the core counted.
                    Ok(None) | Err(_) => continue,
                }
            };
            let len = stamp_frame(frame, tx.len, s.spec.seal.as_mut());
            let to = s.spec.fill.to();
            // (copies attempted, copies sent, system calls)
            let (tried, ok, calls) = match &s.spec.xdp {
                Some(x) => {
                    let path = self.paths.get_mut(x.path.0).and_then(Option::as_mut);
                    let tried = (0..x.addrs.len()).filter(|&i| to.contains(i)).count();
                    let (ok, calls) = path.map_or((0, 0), |p| {
                        let q = p.rings.tx_queue();
                        let woken = p.rings.tx_wakeups();
                        let ok = x
                            .addrs
                            .iter()
                            .enumerate()
                            .filter(|&(i, a)| {
                                to.contains(i) && p.rings.send(q, a, &frame[..len]).is_ok()
                            })
                            .count();
                        (ok, (p.rings.tx_wakeups() - woken) as usize)
                    });
                    (tried, ok, calls)
                }
                None => {
                    let dsts = if to == Destinations::ALL {
                        &s.spec.dsts[..]
                    } else {
                        self.some_dsts.clear();
                        let some = s
                            .spec
                            .dsts
                            .iter()
                            .enumerate()
                            .filter(|&(i, _)| to.contains(i));
                        self.some_dsts.extend(some.map(|(_, a)| *a));
                        &self.some_dsts[..]
                    };
                    (
                        dsts.len(),
                        s.spec.sock.send_many(&frame[..len], dsts),
                        dsts.len().div_ceil(crate::batch::SEND_BATCH),
                    )
                }
            };
            s.report.last_returned_ns = realtime_ns();
            s.report.last_seq = tx.seq;
            self.stats.send_calls += calls as u64;
            self.stats.frames += 1;
            s.report.send_errors += (tried - ok) as u64;
            let late = now.saturating_sub(tx.slot);
            s.report.frames += 1;
            s.report.late_total_ns += late;
            s.report.late_max_ns = s.report.late_max_ns.max(late);
            s.spec.fill.sent(&s.report);
        }
    }

    fn handle_events(&mut self, n: usize) -> io::Result<()> {
        for k in 0..n {
            let token = self.events[k].u64;
            match token {
                TIMER_TOKEN => {
                    let mut v = 0u64;
                    // SAFETY: reads at most 8 bytes into a u64; EAGAIN is fine.
                    unsafe { libc::read(self.timer.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
                }
                CONTROL_TOKEN => self.serve_control(),
                t if t & XDP_TOKEN != 0 => self.drain_xdp(
                    (t & 0xffff_ffff) as usize,
                    ((t & !XDP_TOKEN) >> 32) as usize,
                ),
                i => self.drain_receiver(i as usize)?,
            }
        }
        Ok(())
    }

    fn drain_receiver(&mut self, i: usize) -> io::Result<()> {
        let Some(Some(r)) = self.receivers.get_mut(i) else {
            return Ok(());
        };
        let mut read = 0;
        while read < RECV_BUDGET {
            let n = r.spec.sock.recv_batch(&mut self.batch)?;
            if n == 0 {
                return Ok(());
            }
            self.stats.recv_batches += 1;
            self.stats.datagrams += n as u64;
            read += n;
            for j in 0..n {
                if let Some((st, bytes)) = self.batch.get(j) {
                    deliver(r, st, bytes);
                }
            }
            if n < crate::batch::RECV_BATCH {
                return Ok(());
            }
        }
        self.stats.budget_hits += 1;
        Ok(())
    }

    /// Reads queue `q` of AF_XDP path `p` (at most [`RECV_BUDGET`] frames)
    /// and hands each frame to the receiver of its port.
    fn drain_xdp(&mut self, p: usize, q: usize) {
        let Some(Some(path)) = self.paths.get_mut(p) else {
            return;
        };
        let mut read = 0;
        while read < RECV_BUDGET {
            let n = path.rings.recv_batch(q, &mut self.batch, &mut self.ports);
            if n == 0 {
                return;
            }
            self.stats.recv_batches += 1;
            self.stats.datagrams += n as u64;
            read += n;
            for j in 0..n {
                let Some((st, bytes)) = self.batch.get(j) else {
                    break;
                };
                let port = self.ports[j];
                let owner = path.by_port.iter().find(|&&(p, _)| p == port);
                match owner.and_then(|&(_, i)| self.receivers.get_mut(i)?.as_mut()) {
                    Some(r) => {
                        r.report.xdp += 1;
                        deliver(r, st, bytes);
                    }
                    None => path.rings.count_unclaimed(),
                }
            }
            if n < crate::batch::RECV_BATCH {
                return;
            }
        }
        self.stats.budget_hits += 1;
    }

    fn serve_control(&mut self) {
        let Some(shared) = self.control.clone() else {
            return;
        };
        shared.waker.clear();
        let cmds: Vec<Command<F, S>> = match shared.queue.lock() {
            Ok(mut q) => q.drain(..).collect(),
            Err(_) => return,
        };
        for c in cmds {
            match c {
                Command::AddSender(s, tx) => {
                    let _ = tx.send(self.add_sender(s));
                }
                Command::AddReceiver(r, tx) => {
                    let _ = tx.send(self.add_receiver(r));
                }
                Command::RemoveSender(id, tx) => {
                    let _ = tx.send(self.remove_sender(id));
                }
                Command::RemoveReceiver(id, tx) => {
                    let _ = tx.send(self.remove_receiver(id));
                }
                Command::AddXdp(x, tx) => {
                    let _ = tx.send(self.add_xdp(x));
                }
                Command::RemoveXdp(id, tx) => {
                    let _ = tx.send(self.remove_xdp(id));
                }
            }
        }
    }

    fn arm(&mut self, t_ns: u64) -> io::Result<()> {
        if t_ns == self.armed_ns {
            return Ok(());
        }
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid timer descriptor and itimerspec.
        cvt(unsafe {
            libc::timerfd_settime(
                self.timer.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        })?;
        self.armed_ns = t_ns;
        Ok(())
    }

    /// The lane thread: turns until `stop` is set or `until_ns` passes.
    /// `Interrupt` sleeps in `epoll_wait` until a socket is ready or the
    /// timer reaches the earliest slot; `BusyPoll` spins. The thread's own
    /// CPU time and context switches over the run go to
    /// [`LoopStats::thread`].
    pub fn run(&mut self, stop: &AtomicBool, until_ns: u64, mode: WaitMode) -> io::Result<()> {
        let counter = InstructionCounter::start().ok();
        let start = ThreadUsage::current();
        let r = self.run_inner(stop, until_ns, mode);
        self.stats.thread = ThreadUsage::current().since(&start);
        self.stats.instructions = counter.and_then(|c| c.read().ok());
        r
    }

    /// One turn of a polling lane core: the due senders send, every
    /// AF_XDP ring is looked at directly (shared memory: no system call),
    /// then the sockets, timer and control through one `epoll_wait` that
    /// does not block. A turn that found nothing to do is counted.
    fn poll_turn(&mut self, now: u64) -> io::Result<()> {
        let before = (self.stats.frames, self.stats.datagrams);
        self.stats.turns += 1;
        self.send_due(now);
        for p in 0..self.paths.len() {
            let queues = self.paths[p].as_ref().map_or(0, |x| x.rings.queues());
            for q in 0..queues {
                self.drain_xdp(p, q);
            }
        }
        self.recv_due(now)?;
        if (self.stats.frames, self.stats.datagrams) == before {
            self.stats.idle_turns += 1;
        }
        Ok(())
    }

    fn run_inner(&mut self, stop: &AtomicBool, until_ns: u64, mode: WaitMode) -> io::Result<()> {
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let now = realtime_ns();
            if now >= until_ns {
                return Ok(());
            }
            let wake = self
                .next_deadline()
                .unwrap_or(u64::MAX)
                .min(until_ns)
                .min(now + MAX_WAIT_NS);
            match mode {
                WaitMode::BusyPoll => self.poll_turn(now)?,
                WaitMode::Interrupt => {
                    if wake > now {
                        self.arm(wake)?;
                        self.stats.sleeps += 1;
                        let n = match self.epoll.wait(&mut self.events[..], -1) {
                            Ok(n) => n,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                            Err(e) => return Err(e),
                        };
                        // The slot first: it is the time-critical part.
                        self.stats.turns += 1;
                        self.send_due(realtime_ns());
                        self.handle_events(n)?;
                    }
                    // Frames our own sends just delivered (on veth they
                    // arrive in the sending CPU's softirq), and anything
                    // that came in meanwhile.
                    self.poll(realtime_ns())?;
                }
            }
        }
    }

    /// The descriptor an embedding loop waits on ([`Self::fd`]), borrowed.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }

    /// Every end, for their reports: senders and receivers in handle order
    /// (removed ones are left out).
    pub fn into_ends(self) -> (Vec<SenderEnd<F>>, Vec<ReceiverEnd<S>>) {
        (
            self.senders.into_iter().flatten().collect(),
            self.receivers.into_iter().flatten().collect(),
        )
    }
}
