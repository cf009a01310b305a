//! The cores on UDP sockets: an endpoint (a process's sender and receiver
//! on one socket) and a hop (an [`Aggregator`] that forwards), each driven
//! from its caller's thread.
//!
//! Data, recalls and beacons go from an endpoint to its hop, from hop to
//! hop along the routes, and from the last hop to the receiver; ACKs and
//! NAKs go straight back to the sender (they carry no order). A hop knows
//! its input links by the address they come from, and each output by the
//! address it sends to. Timestamps are `CLOCK_MONOTONIC` in ns: one clock
//! for every process on a machine. Across machines the clocks must be
//! synchronized (PTP), and skew only delays delivery (`docs/pipe.md`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use nix::poll::{ppoll, PollFd, PollFlags};
use nix::sys::time::TimeSpec;

use crate::ctl::{Ctl, CTL_MAX_LEN};
use crate::lane::{LaneBeacon, LanePort, LanePortConfig, LanePortError};
pub use crate::seal::KeyError;
use crate::seal::{self, PipeSeal, TRAILER_LEN};
use crate::wire::{Header, Kind, Packet, HEADER_LEN, MAX_PAYLOAD};
use crate::{
    AggConfig, AggError, AggEvent, Aggregator, Delivery, LinkId, Nanos, Receiver, ReceiverConfig,
    SendError, SendEvent, Sender, SenderConfig,
};
use xlane_auth::KeyRing;

/// The clock an endpoint stamps scatterings with (and runs its timers on).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Clock {
    /// `CLOCK_MONOTONIC`: every process on one machine (the testbed).
    #[default]
    Monotonic,
    /// `CLOCK_TAI`: processes on several hosts whose clocks PTP keeps
    /// together (`ptp4l` on the NIC, `phc2sys` to the system clock, the
    /// kernel's TAI offset set; see `docs/pipe.md`). Monotonic clocks of
    /// two hosts are unrelated, and would hold delivery back forever.
    Tai,
}

impl Clock {
    /// The time, ns.
    pub fn now(self) -> Nanos {
        let id = match self {
            Clock::Monotonic => nix::time::ClockId::CLOCK_MONOTONIC,
            Clock::Tai => nix::time::ClockId::CLOCK_TAI,
        };
        nix::time::clock_gettime(id)
            .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
            .unwrap_or(0)
    }
}

/// `CLOCK_MONOTONIC`, ns.
pub fn now_ns() -> Nanos {
    Clock::Monotonic.now()
}

/// Most datagrams read per turn.
const RECV_BUDGET: usize = 256;

/// Counters of a driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Datagrams read.
    pub received: u64,
    /// Datagrams sent.
    pub sent: u64,
    /// Datagrams refused: not 1Pipe, from an unknown address, or a
    /// barrier that went back.
    pub refused: u64,
    /// Sends that failed.
    pub send_errors: u64,
    /// Datagrams dropped by the MAC check (with a key: forged, replayed
    /// or unkeyed; [`crate::seal`]).
    pub unauthenticated: u64,
    /// Input links that spoke again after they were removed as silent
    /// (they join again: they count once their barrier catches up).
    pub rejoined: u64,
    /// Beacons sent (of `sent`; lane beacons are counted by the lane
    /// port).
    pub beacons: u64,
}

fn bind(addr: SocketAddrV4) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Sets the TOS byte (DSCP << 2) of everything `s` sends: a class of the
/// express lane, say, instead of best effort.
fn set_tos(s: &UdpSocket, tos: u8) -> io::Result<()> {
    nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::IpTos, &i32::from(tos))
        .map_err(io::Error::from)
}

/// Sleeps until `sock` (or the lane port) is readable or `until` (ns on
/// `clock`).
fn sleep_until(
    sock: &UdpSocket,
    lane: Option<BorrowedFd<'_>>,
    until: Nanos,
    clock: Clock,
) -> io::Result<()> {
    let now = clock.now();
    if until <= now {
        return Ok(());
    }
    let wait = Duration::from_nanos(until - now);
    let mut fds = [
        PollFd::new(sock.as_fd(), PollFlags::POLLIN),
        PollFd::new(lane.unwrap_or(sock.as_fd()), PollFlags::POLLIN),
    ];
    let n = if lane.is_some() { 2 } else { 1 };
    match ppoll(&mut fds[..n], Some(TimeSpec::from_duration(wait)), None) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// One datagram if one is waiting: its length and IPv4 source (`None`
/// source: an IPv6 one). `Ok(None)` when nothing is. With `seal`, a
/// datagram that does not open is counted and skipped (at most
/// [`RECV_BUDGET`] of them per call), and the length is its payload's.
fn recv(
    sock: &UdpSocket,
    buf: &mut [u8],
    stats: &mut DriverStats,
    seal: &mut Option<PipeSeal>,
) -> io::Result<Option<(usize, Option<SocketAddrV4>)>> {
    for _ in 0..RECV_BUDGET {
        let (n, from) = match sock.recv_from(buf) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(e) => return Err(e),
        };
        stats.received += 1;
        let from = match from {
            SocketAddr::V4(a) => Some(a),
            SocketAddr::V6(_) => None,
        };
        match seal::opened(seal.as_mut(), &buf[..n]) {
            Some(len) => return Ok(Some((len, from))),
            None => stats.unauthenticated += 1,
        }
    }
    Ok(None)
}

fn send_to(
    sock: &UdpSocket,
    bytes: &[u8],
    to: SocketAddrV4,
    stats: &mut DriverStats,
    seal: &mut Option<PipeSeal>,
) {
    match seal::send(sock, seal.as_mut(), bytes, to) {
        Ok(_) => stats.sent += 1,
        Err(_) => stats.send_errors += 1,
    }
}

/// A process on a UDP socket.
pub struct UdpEndpoint {
    sock: UdpSocket,
    hop: SocketAddrV4,
    peers: HashMap<u32, SocketAddrV4>,
    sender: Sender,
    receiver: Receiver,
    beacon_interval_ns: Nanos,
    last_sent: Nanos,
    buf: Vec<u8>,
    stats: DriverStats,
    me: u32,
    clock: Clock,
    downlink: Option<SocketAddrV4>,
    coordinators: Vec<SocketAddrV4>,
    failed: HashSet<u32>,
    proc_fails: VecDeque<(u32, u64)>,
    lane: Option<LanePort>,
    seal: Option<PipeSeal>,
}

impl UdpEndpoint {
    /// Process `me` on `addr`, sending through `hop`; `peers` maps every
    /// process it replies to onto its address. Idle, it sends a beacon
    /// every `beacon_interval_ns`.
    pub fn bind(
        addr: SocketAddrV4,
        me: u32,
        hop: SocketAddrV4,
        peers: HashMap<u32, SocketAddrV4>,
        beacon_interval_ns: Nanos,
        cfg: (SenderConfig, ReceiverConfig),
    ) -> io::Result<Self> {
        Ok(UdpEndpoint {
            sock: bind(addr)?,
            hop,
            peers,
            sender: Sender::new(me, cfg.0),
            receiver: Receiver::new(me, cfg.1),
            beacon_interval_ns: beacon_interval_ns.max(1),
            last_sent: 0,
            buf: vec![0u8; HEADER_LEN + MAX_PAYLOAD + TRAILER_LEN + 1],
            stats: DriverStats::default(),
            me,
            clock: Clock::Monotonic,
            downlink: None,
            coordinators: Vec::new(),
            failed: HashSet::new(),
            proc_fails: VecDeque::new(),
            lane: None,
            seal: None,
        })
    }

    /// Beacons go on the express lane too from now on: one every period
    /// of the port's tunnel (granted by the controller, to the hop's host),
    /// capped so that it does not overtake this process's data; the hop's
    /// beacons are taken from the tunnels the port receives (the hop's
    /// multicast tunnel). The idle link still gets its regular beacons,
    /// which need no cap (they travel with the data, in order): the hop
    /// takes the larger barriers of the two, so the lane can only make the
    /// barrier move sooner. Set the clock first.
    pub fn set_lane(&mut self, cfg: &LanePortConfig) -> Result<(), LanePortError> {
        self.lane = Some(LanePort::open(cfg, self.clock.now())?);
        Ok(())
    }

    /// Seals every datagram with key `key_id` of `ring` from now on, and
    /// opens every one received under `ring`'s keys, dropping those that
    /// do not open ([`crate::seal`]). Every process, hop and coordinator
    /// of the group needs the key.
    pub fn set_key(&mut self, ring: KeyRing, key_id: u32) -> Result<(), KeyError> {
        self.seal = Some(PipeSeal::for_socket(ring, key_id, &self.sock)?);
        Ok(())
    }

    /// The lane port's counters, if beacons go on the lane.
    pub fn lane_stats(&self) -> Option<crate::lane::LaneStats> {
        self.lane.as_ref().map(LanePort::stats)
    }

    /// The lane port's address, if beacons go on the lane.
    pub fn lane_addr(&self) -> Option<SocketAddrV4> {
        self.lane.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The socket's address.
    pub fn local_addr(&self) -> io::Result<SocketAddrV4> {
        seal::local_v4(&self.sock)
    }

    /// Sends everything with this TOS byte (DSCP << 2).
    pub fn set_tos(&self, tos: u8) -> io::Result<()> {
        set_tos(&self.sock, tos)
    }

    /// Stamps with `clock` from now on (set it before the first
    /// scattering; [`Clock::Monotonic`] by default).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// The hop that delivers to this process, when it is not the one it
    /// sends through: a fabric whose switches have an up hop and a down
    /// hop, as 1Pipe's (data and beacons are then taken from it alone).
    pub fn set_downlink(&mut self, hop: SocketAddrV4) {
        self.downlink = Some(hop);
    }

    /// The recovery coordinators whose [`Ctl::ProcFail`] this process
    /// obeys (control messages from anyone else are refused).
    pub fn set_coordinators(&mut self, coordinators: Vec<SocketAddrV4>) {
        self.coordinators = coordinators;
    }

    /// 1Pipe's `proc_fail(process, ts)` callback: the next process the
    /// coordinator declared failed, with its failure timestamp, once this
    /// endpoint has discarded and aborted for it. This process's own id
    /// means it was declared failed (excluded): it must stop, and come
    /// back under a new id.
    pub fn poll_proc_fail(&mut self) -> Option<(u32, u64)> {
        self.proc_fails.pop_front()
    }

    fn on_ctl(&mut self, from: SocketAddrV4, n: usize) {
        let msg = match Ctl::parse(&self.buf[..n]) {
            Ok(m) if self.coordinators.contains(&from) => m,
            _ => {
                self.stats.refused += 1;
                return;
            }
        };
        let Ctl::ProcFail { proc, t_fail } = msg else {
            self.stats.refused += 1;
            return;
        };
        if self.failed.insert(proc) {
            if proc != self.me {
                self.proc_failed(proc, t_fail);
            }
            self.proc_fails.push_back((proc, t_fail));
        }
        let mut b = Vec::with_capacity(CTL_MAX_LEN);
        Ctl::ProcFailAck {
            proc,
            from: self.me,
        }
        .emit(&mut b);
        send_to(&self.sock, &b, from, &mut self.stats, &mut self.seal);
    }

    /// The sender core.
    pub fn sender(&self) -> &Sender {
        &self.sender
    }

    /// The receiver core.
    pub fn receiver(&self) -> &Receiver {
        &self.receiver
    }

    /// The driver's counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// Sends a scattering now; returns its timestamp.
    pub fn scatter(&mut self, msgs: &[(u32, &[u8])], reliable: bool) -> Result<u64, SendError> {
        let ts = self.sender.scatter(self.clock.now(), msgs, reliable)?;
        self.flush(self.clock.now());
        Ok(ts)
    }

    /// Process `proc` failed (the coordinator says so): abort what must be
    /// aborted, discard its messages above `t_fail`.
    pub fn proc_failed(&mut self, proc: u32, t_fail: u64) {
        self.receiver.discard(proc, t_fail);
        self.sender.proc_failed(proc, self.clock.now());
        self.flush(self.clock.now());
    }

    fn flush(&mut self, now: Nanos) {
        while let Some(o) = self.sender.poll_transmit() {
            if let Ok(n) = o.header.emit(&o.payload, &mut self.buf) {
                send_to(
                    &self.sock,
                    &self.buf[..n],
                    self.hop,
                    &mut self.stats,
                    &mut self.seal,
                );
                self.last_sent = now;
                if let Some(l) = self.lane.as_mut() {
                    l.on_regular_sent(now, o.header.barrier, o.header.commit);
                }
            }
        }
        while let Some(r) = self.receiver.poll_reply() {
            let Some(&to) = self.peers.get(&r.dst) else {
                continue;
            };
            if let Ok(n) = r.emit(&[], &mut self.buf) {
                send_to(
                    &self.sock,
                    &self.buf[..n],
                    to,
                    &mut self.stats,
                    &mut self.seal,
                );
            }
        }
    }

    /// Reads what came, runs the timers, sends what is due. Bounded:
    /// at most 256 datagrams.
    pub fn turn(&mut self) -> io::Result<()> {
        for _ in 0..RECV_BUDGET {
            let Some((n, from)) = recv(&self.sock, &mut self.buf, &mut self.stats, &mut self.seal)?
            else {
                break;
            };
            let Some(from) = from else {
                self.stats.refused += 1;
                continue;
            };
            if Ctl::is_ctl(&self.buf[..n]) {
                self.on_ctl(from, n);
                continue;
            }
            let Ok(p) = Packet::new_checked(&self.buf[..n]) else {
                self.stats.refused += 1;
                continue;
            };
            let h = *p.header();
            match h.kind {
                Kind::Ack | Kind::Nak => self.sender.on_reply(&h),
                _ if from == self.downlink.unwrap_or(self.hop) => {
                    if self
                        .receiver
                        .on_packet(&h, p.payload(), self.clock.now())
                        .is_err()
                    {
                        self.stats.refused += 1;
                    }
                }
                _ => self.stats.refused += 1,
            }
        }
        let now = self.clock.now();
        if let Some(l) = self.lane.as_mut() {
            let rx = &mut self.receiver;
            l.recv(now, &mut |b: LaneBeacon, _| {
                rx.on_barriers(b.barrier, b.commit)
            })?;
        }
        self.sender.handle_timeout(now);
        self.flush(now);
        if let Some(l) = self.lane.as_mut() {
            let (me, sender) = (self.me, &mut self.sender);
            l.send_due(now, me, || {
                (sender.barrier(now), sender.commit_barrier(now))
            });
        }
        if now.saturating_sub(self.last_sent) >= self.beacon_interval_ns {
            let b = self.sender.beacon(now);
            if let Ok(n) = b.emit(&[], &mut self.buf) {
                send_to(
                    &self.sock,
                    &self.buf[..n],
                    self.hop,
                    &mut self.stats,
                    &mut self.seal,
                );
                self.stats.beacons += 1;
            }
            self.last_sent = now;
        }
        Ok(())
    }

    /// Sleeps until a datagram comes, a timer is due or `max` passed,
    /// then takes a turn.
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        let mut beacon = self.last_sent.saturating_add(self.beacon_interval_ns);
        if let Some(t) = self.lane.as_ref().and_then(LanePort::poll_timeout) {
            beacon = beacon.min(t);
        }
        let mut timer = self.sender.poll_timeout().map_or(beacon, |t| t.min(beacon));
        if let Some(t) = self.receiver.poll_timeout() {
            timer = timer.min(t);
        }
        let limit = self.clock.now().saturating_add(max.as_nanos() as Nanos);
        let lane = self.lane.as_ref().map(LanePort::as_fd);
        sleep_until(&self.sock, lane, timer.min(limit), self.clock)?;
        self.turn()
    }

    /// The next delivered message.
    pub fn poll_deliver(&mut self) -> Option<Delivery> {
        self.receiver.poll_deliver(self.clock.now())
    }

    /// The next send event (`send_fail`).
    pub fn poll_event(&mut self) -> Option<SendEvent> {
        self.sender.poll_event()
    }
}

/// A hop's links and routes.
#[derive(Clone, Debug)]
pub struct HopConfig {
    /// Beacons and silent links.
    pub agg: AggConfig,
    /// Addresses whose datagrams are input links (endpoints or hops).
    pub inputs: Vec<SocketAddrV4>,
    /// Where each process's data goes next (an endpoint or a hop); every
    /// such address is an output link and gets beacons when idle.
    pub routes: Vec<(u32, SocketAddrV4)>,
}

/// A hop on a UDP socket: 1Pipe's switch logic, run by the switch's host
/// representative.
pub struct UdpHop {
    sock: UdpSocket,
    agg: Aggregator,
    inputs: HashMap<SocketAddrV4, LinkId>,
    outputs: Vec<SocketAddrV4>,
    routes: HashMap<u32, usize>,
    buf: Vec<u8>,
    stats: DriverStats,
    coordinators: Vec<SocketAddrV4>,
    /// Held silent links waiting for a coordinator's `Remove`, with their
    /// last barriers.
    held: HashMap<SocketAddrV4, (u64, u64)>,
    next_report: Nanos,
    events: VecDeque<(AggEvent, Option<SocketAddrV4>)>,
    removed: VecDeque<SocketAddrV4>,
    lane: Option<HopLane>,
    seal: Option<PipeSeal>,
}

/// A hop's beacons on the express lane.
struct HopLane {
    port: LanePort,
    /// The input link of each process that sends to this hop directly.
    by_src: HashMap<u32, LinkId>,
}

/// The sender id in a hop's lane beacons.
pub const HOP_SRC: u32 = u32::MAX;

/// Takes input `link`'s barriers with `take`. A link removed as silent
/// that speaks again joins anew first (counted in `rejoined`): it counts
/// once its barrier catches up.
fn take_rejoining(
    agg: &mut Aggregator,
    link: LinkId,
    now: Nanos,
    rejoined: &mut u64,
    take: impl Fn(&mut Aggregator) -> Result<(u64, u64), AggError>,
) -> Result<(u64, u64), AggError> {
    let r = take(agg);
    if r == Err(AggError::UnknownLink(link)) && agg.add_input(link, now).is_ok() {
        *rejoined += 1;
        return take(agg);
    }
    r
}

/// How often a hop reports a held link to the coordinators.
pub const REPORT_EVERY_NS: Nanos = 20_000_000;

impl UdpHop {
    /// A hop on `addr`.
    pub fn bind(addr: SocketAddrV4, cfg: HopConfig) -> io::Result<Self> {
        let now = now_ns();
        let mut agg = Aggregator::new(cfg.agg);
        let mut inputs = HashMap::new();
        for (i, a) in cfg.inputs.iter().enumerate() {
            agg.add_input(i as LinkId, now)
                .map_err(|e| io::Error::other(e.to_string()))?;
            inputs.insert(*a, i as LinkId);
        }
        let mut outputs: Vec<SocketAddrV4> = Vec::new();
        let mut routes = HashMap::new();
        for (proc, a) in &cfg.routes {
            let i = match outputs.iter().position(|o| o == a) {
                Some(i) => i,
                None => {
                    agg.add_output(outputs.len() as LinkId, now)
                        .map_err(|e| io::Error::other(e.to_string()))?;
                    outputs.push(*a);
                    outputs.len() - 1
                }
            };
            routes.insert(*proc, i);
        }
        Ok(UdpHop {
            sock: bind(addr)?,
            agg,
            inputs,
            outputs,
            routes,
            buf: vec![0u8; HEADER_LEN + MAX_PAYLOAD + TRAILER_LEN + 1],
            stats: DriverStats::default(),
            coordinators: Vec::new(),
            held: HashMap::new(),
            next_report: 0,
            events: VecDeque::new(),
            removed: VecDeque::new(),
            lane: None,
            seal: None,
        })
    }

    /// Beacons on the express lane too from now on: the processes'
    /// beacons are taken from the tunnels the port receives (each
    /// process's own, granted by the controller to this hop's host; a
    /// process is known by the sender id in its beacons, bound to the
    /// tunnel it first came on), by maximum ([`Aggregator::on_beacon`]),
    /// and the hop's beacons go out every period on the port's tunnel (a
    /// multicast tunnel to its processes' hosts), capped so that they do
    /// not overtake what it forwards. Idle outputs still get their regular
    /// beacons.
    pub fn set_lane(&mut self, cfg: &LanePortConfig) -> Result<(), LanePortError> {
        let port = LanePort::open(cfg, now_ns())?;
        let by_src = self
            .routes
            .iter()
            .filter_map(|(&proc, &out)| {
                let link = self.inputs.get(&self.outputs[out])?;
                Some((proc, *link))
            })
            .collect();
        self.lane = Some(HopLane { port, by_src });
        Ok(())
    }

    /// The lane port's counters, if beacons go on the lane.
    pub fn lane_stats(&self) -> Option<crate::lane::LaneStats> {
        self.lane.as_ref().map(|l| l.port.stats())
    }

    /// The lane port's address, if beacons go on the lane.
    pub fn lane_addr(&self) -> Option<SocketAddrV4> {
        self.lane.as_ref().and_then(|l| l.port.local_addr().ok())
    }

    /// Takes the processes' lane beacons.
    fn lane_recv(&mut self) -> io::Result<()> {
        let Some(lane) = self.lane.as_mut() else {
            return Ok(());
        };
        let (agg, stats, by_src) = (&mut self.agg, &mut self.stats, &lane.by_src);
        lane.port.recv(now_ns(), &mut |b: LaneBeacon, period| {
            let Some(&link) = by_src.get(&b.src) else {
                stats.refused += 1;
                return;
            };
            let now = now_ns();
            let r = take_rejoining(agg, link, now, &mut stats.rejoined, |agg| {
                agg.on_beacon(link, b.barrier, b.commit, now)
            });
            if r.is_err() {
                // Fenced: a held silent link.
                stats.refused += 1;
            }
            let _ = agg.set_input_interval(link, period);
        })
    }

    /// The socket's address.
    pub fn local_addr(&self) -> io::Result<SocketAddrV4> {
        seal::local_v4(&self.sock)
    }

    /// Seals every datagram with key `key_id` of `ring` from now on, and
    /// opens every one received under `ring`'s keys, dropping those that
    /// do not open ([`crate::seal`]). Every process, hop and coordinator
    /// of the group needs the key.
    pub fn set_key(&mut self, ring: KeyRing, key_id: u32) -> Result<(), KeyError> {
        self.seal = Some(PipeSeal::for_socket(ring, key_id, &self.sock)?);
        Ok(())
    }

    /// Sends everything with this TOS byte (DSCP << 2).
    pub fn set_tos(&self, tos: u8) -> io::Result<()> {
        set_tos(&self.sock, tos)
    }

    /// The recovery coordinators: each held silent link is reported to
    /// them ([`Ctl::Silent`], every [`REPORT_EVERY_NS`]) until one of
    /// them has it removed ([`Ctl::Remove`]; control messages from anyone
    /// else are refused).
    pub fn set_coordinators(&mut self, coordinators: Vec<SocketAddrV4>) {
        self.coordinators = coordinators;
    }

    /// The next input a coordinator had removed.
    pub fn poll_removed(&mut self) -> Option<SocketAddrV4> {
        self.removed.pop_front()
    }

    fn on_ctl(&mut self, from: SocketAddrV4, n: usize) {
        match Ctl::parse(&self.buf[..n]) {
            Ok(Ctl::Remove { link }) if self.coordinators.contains(&from) => {
                if self.held.remove(&link).is_some() {
                    let _ = self.remove_input(link);
                    self.removed.push_back(link);
                }
                let mut b = Vec::with_capacity(CTL_MAX_LEN);
                Ctl::Removed { link }.emit(&mut b);
                send_to(&self.sock, &b, from, &mut self.stats, &mut self.seal);
            }
            _ => self.stats.refused += 1,
        }
    }

    /// Moves the core's link events to the caller's queue, noting the
    /// links it holds, and reports those to the coordinators when due.
    fn report(&mut self, now: Nanos) {
        while let Some(e) = self.agg.poll_event() {
            let id = match e {
                AggEvent::LinkSilent { link, .. } | AggEvent::LinkUp(link) => link,
            };
            let addr = self.inputs.iter().find(|(_, &l)| l == id).map(|(a, _)| *a);
            if let (
                AggEvent::LinkSilent {
                    barrier, commit, ..
                },
                Some(a),
                true,
            ) = (e, addr, self.agg.config().hold_silent)
            {
                self.held.insert(a, (barrier, commit));
                self.next_report = now;
            }
            self.events.push_back((e, addr));
        }
        if self.held.is_empty() || self.coordinators.is_empty() || now < self.next_report {
            return;
        }
        self.next_report = now + REPORT_EVERY_NS;
        let mut b = Vec::with_capacity(CTL_MAX_LEN);
        for (&link, &(barrier, commit)) in &self.held {
            b.clear();
            Ctl::Silent {
                link,
                barrier,
                commit,
            }
            .emit(&mut b);
            for &c in &self.coordinators {
                send_to(&self.sock, &b, c, &mut self.stats, &mut self.seal);
            }
        }
    }

    /// The hop core.
    pub fn core(&self) -> &Aggregator {
        &self.agg
    }

    /// The driver's counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }

    /// Removes the input link from `addr` (a held silent link, once the
    /// recovery is done), so that the barrier moves on. If it speaks
    /// again it joins anew. False if no live input comes from `addr`.
    pub fn remove_input(&mut self, addr: SocketAddrV4) -> bool {
        self.held.remove(&addr);
        self.inputs
            .get(&addr)
            .is_some_and(|&link| self.agg.remove_input(link).is_ok())
    }

    /// The next link event, with the address of the link (poll it after
    /// each turn: silent links are reported here).
    pub fn poll_event(&mut self) -> Option<(AggEvent, Option<SocketAddrV4>)> {
        self.report(now_ns());
        self.events.pop_front()
    }

    /// Reads and forwards what came, sends beacons that are due.
    /// Bounded: at most 256 datagrams. Silent links are looked for only
    /// once the socket is drained: after the machine held the hop back,
    /// a link whose packets still wait in the socket is not silent.
    pub fn turn(&mut self) -> io::Result<()> {
        let mut drained = false;
        for _ in 0..RECV_BUDGET {
            let Some((n, from)) = recv(&self.sock, &mut self.buf, &mut self.stats, &mut self.seal)?
            else {
                drained = true;
                break;
            };
            if let (Some(a), true) = (from, Ctl::is_ctl(&self.buf[..n])) {
                self.on_ctl(a, n);
                continue;
            }
            let link = from.and_then(|a| self.inputs.get(&a).copied());
            let (Some(link), Ok(p)) = (link, Packet::new_checked(&self.buf[..n])) else {
                self.stats.refused += 1;
                continue;
            };
            let h: Header = *p.header();
            let now = now_ns();
            // A beacon carries no message: taken by maximum (a lane
            // beacon may have overtaken it).
            let beacon = h.kind == Kind::Beacon;
            let r = take_rejoining(&mut self.agg, link, now, &mut self.stats.rejoined, |agg| {
                match beacon {
                    true => agg.on_beacon(link, h.barrier, h.commit, now),
                    false => agg.on_packet(link, h.barrier, h.commit, now),
                }
            });
            let Ok((b, c)) = r else {
                // A barrier that went back.
                self.stats.refused += 1;
                continue;
            };
            if !matches!(h.kind, Kind::Data | Kind::Recall) {
                continue;
            }
            let Some(&out) = self.routes.get(&h.dst) else {
                self.stats.refused += 1;
                continue;
            };
            // The hop's barriers in place of the packet's; the rest of the
            // datagram goes on as it came.
            self.write_barriers(b, c);
            send_to(
                &self.sock,
                &self.buf[..n],
                self.outputs[out],
                &mut self.stats,
                &mut self.seal,
            );
            self.agg.on_sent(out as LinkId, now);
            if let Some(l) = self.lane.as_mut() {
                l.port.on_regular_sent(now, b, c);
            }
        }
        self.lane_recv()?;
        let now = now_ns();
        if drained {
            self.agg.handle_timeout(now);
        }
        self.report(now);
        if let Some(l) = self.lane.as_mut() {
            let agg = &mut self.agg;
            l.port.send_due(now, HOP_SRC, || agg.barriers());
        }
        while let Some(out) = self.agg.poll_beacon(now) {
            let (b, c) = self.agg.barriers();
            let h = Header::beacon(0, b, c);
            let mut bytes = [0u8; HEADER_LEN];
            if h.emit(&[], &mut bytes).is_ok() {
                send_to(
                    &self.sock,
                    &bytes,
                    self.outputs[out as usize],
                    &mut self.stats,
                    &mut self.seal,
                );
                self.stats.beacons += 1;
            }
        }
        Ok(())
    }

    fn write_barriers(&mut self, barrier: u64, commit: u64) {
        use crate::wire::field;
        self.buf[field::BARRIER].copy_from_slice(&barrier.to_be_bytes());
        self.buf[field::COMMIT].copy_from_slice(&commit.to_be_bytes());
    }

    /// Sleeps until a datagram comes, a timer is due or `max` passed,
    /// then takes a turn.
    pub fn wait(&mut self, max: Duration) -> io::Result<()> {
        let limit = now_ns().saturating_add(max.as_nanos() as Nanos);
        let mut t = self.agg.poll_timeout().map_or(limit, |t| t.min(limit));
        if !self.held.is_empty() && !self.coordinators.is_empty() {
            t = t.min(self.next_report);
        }
        if let Some(due) = self.lane.as_ref().and_then(|l| l.port.poll_timeout()) {
            t = t.min(due);
        }
        let lane = self.lane.as_ref().map(|l| l.port.as_fd());
        sleep_until(&self.sock, lane, t, Clock::Monotonic)?;
        self.turn()
    }
}
