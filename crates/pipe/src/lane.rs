//! 1Pipe's beacons on the express lane: the beacon as it rides in one
//! lane chunk ([`LaneBeacon`]), the cap that keeps a beacon on the lane
//! from overtaking data on the regular path ([`BarrierCap`]), and the
//! socket side ([`LanePort`]): a tunnel the controller granted to send
//! beacons on, the tunnels to take beacons from, each frame checked by the
//! lane's own receiver core of its tunnel, all on a lane loop
//! ([`LaneLoop`]: the send stamped right before the system call, the
//! frames read in batches) that the process's or hop's event loop embeds.
//! [`crate::udp::UdpEndpoint::set_lane`] and
//! [`crate::udp::UdpHop::set_lane`] put it under a process and a hop.
//!
//! **Why a cap.** 1Pipe needs FIFO on each link: a barrier promises that
//! nothing older follows on that link. Beacons on the lane and data on
//! the regular path are two paths, and a beacon can overtake data sent
//! before it. The order still holds (the hop refuses a packet whose
//! barrier went back, a receiver refuses a late best-effort message, and
//! the commit barrier stays below anything unacknowledged), but the
//! overtaken packet is lost. So a beacon on the lane carries no more than
//! the barriers of the oldest regular packet sent within a window `W`:
//! regular packets faster than `W` are never overtaken, slower ones are
//! lost and reported, never misordered. With no regular packet in the
//! last `W`, the beacon carries the current barriers: the idle case
//! beacons exist for.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::BorrowedFd;

use xlane_host::lane_loop::{
    FrameSink, LaneLoop, ReceiverId, ReceiverSpec, SenderId, SenderSpec, SlotFill, RECV_BUDGET,
};
use xlane_host::runtime::Sample;
use xlane_host::socket::{LaneSocket, RxStamps, SocketConfig, SocketError};
use xlane_lane::{first_slot_after, Delivery, PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_wire::{Frame, Schema, HEADER_LEN};

use crate::Nanos;

/// Bytes of a [`LaneBeacon`]: one 30-byte lane chunk holds it.
pub const LANE_BEACON_LEN: usize = 24;

/// A beacon on the lane: who sends it, the period it sends at, and its
/// barriers. (The hop scales an input's silence limit to the period its
/// tunnel was granted, which it holds itself; the period in the beacon
/// says what the sender runs at, for a capture or a log.) Big-endian:
/// `src:u32 | period_us:u32 | barrier:u64 | commit:u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneBeacon {
    /// The sending process (or hop).
    pub src: u32,
    /// Its lane period, µs.
    pub period_us: u32,
    /// The best-effort barrier.
    pub barrier: u64,
    /// The commit barrier (never above `barrier`).
    pub commit: u64,
}

/// Why a lane beacon was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LaneBeaconError {
    /// Not [`LANE_BEACON_LEN`] bytes.
    #[error("a lane beacon is {LANE_BEACON_LEN} bytes, not {0}")]
    Length(usize),
    /// The commit barrier above the barrier.
    #[error("commit barrier {commit} above barrier {barrier}")]
    CommitAbove {
        /// The barrier.
        barrier: u64,
        /// The commit barrier.
        commit: u64,
    },
}

impl LaneBeacon {
    /// The encoding.
    pub fn encode(&self) -> [u8; LANE_BEACON_LEN] {
        let mut b = [0u8; LANE_BEACON_LEN];
        b[0..4].copy_from_slice(&self.src.to_be_bytes());
        b[4..8].copy_from_slice(&self.period_us.to_be_bytes());
        b[8..16].copy_from_slice(&self.barrier.to_be_bytes());
        b[16..24].copy_from_slice(&self.commit.to_be_bytes());
        b
    }

    /// Decodes exactly [`LANE_BEACON_LEN`] bytes.
    pub fn decode(b: &[u8]) -> Result<LaneBeacon, LaneBeaconError> {
        let b: &[u8; LANE_BEACON_LEN] =
            b.try_into().map_err(|_| LaneBeaconError::Length(b.len()))?;
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_be_bytes(x)
        };
        let m = LaneBeacon {
            src: u32_at(0),
            period_us: u32_at(4),
            barrier: u64_at(8),
            commit: u64_at(16),
        };
        if m.commit > m.barrier {
            return Err(LaneBeaconError::CommitAbove {
                barrier: m.barrier,
                commit: m.commit,
            });
        }
        Ok(m)
    }
}

/// The lane chunk schema of beacon frames: one 30-byte chunk holds a
/// [`LaneBeacon`].
pub const LANE_SCHEMA: Schema = Schema::Chunk36;
/// A beacon frame: the lane header and one chunk (68 bytes).
pub const LANE_FRAME_LEN: usize = HEADER_LEN + LANE_SCHEMA.chunk_len();
/// σ of a beacon tunnel as the controller counts it: the frame with its
/// UDP, IPv4 and Ethernet headers (110 bytes).
pub const LANE_WIRE_BYTES: u32 = (LANE_FRAME_LEN + 8 + 20 + 14) as u32;
/// The producer id of beacon chunks.
pub const LANE_PRODUCER: u8 = 0x1F;

/// A beacon tunnel: its id (in every frame) and period, as the controller
/// granted them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaneTunnel {
    /// The tunnel id.
    pub tunnel: u32,
    /// The granted period π, ns.
    pub period_ns: u64,
}

/// How to open a [`LanePort`].
#[derive(Debug, Clone)]
pub struct LanePortConfig {
    /// Address to bind: the host's address and the lane port, or
    /// `0.0.0.0:port` to receive a multicast tunnel (several processes of
    /// one host may bind the same port: each gets every frame).
    pub bind: SocketAddrV4,
    /// Join this multicast group on the interface with this address (a
    /// multicast tunnel's group, `xlane_ctl::fabric::group_of`).
    pub join: Option<(Ipv4Addr, Ipv4Addr)>,
    /// Send multicast out of the interface with this address.
    pub multicast_if: Option<Ipv4Addr>,
    /// DSCP of the express sub-lane the tunnel was granted on.
    pub dscp: u8,
    /// The tunnel to send beacons on, and where its frames go (the hop
    /// host's lane address, or the group and port).
    pub tx: Option<(LaneTunnel, SocketAddrV4)>,
    /// The tunnels to take beacons from.
    pub rx: Vec<LaneTunnel>,
    /// `W` of the [`BarrierCap`]: about the regular path's p99.9 delay.
    pub window_ns: Nanos,
}

/// Counters of a [`LanePort`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaneStats {
    /// Beacon frames sent.
    pub sent: u64,
    /// `sendto` failures.
    pub send_errors: u64,
    /// Beacons taken.
    pub received: u64,
    /// Datagrams refused: no lane frame, a tunnel not taken from, a
    /// refused frame (duplicate, stale, oversized), no valid beacon in
    /// it, or a beacon from another sender than the tunnel's first.
    pub refused: u64,
    /// Frames missing by sequence number on the tunnels taken from.
    pub lost: u64,
    /// Beacons whose barriers the cap held below the current ones.
    pub capped: u64,
}

/// A tunnel taken from: the lane's receiver core, and the sender its first
/// beacon came from.
struct Rx {
    tunnel: u32,
    core: PeriodicReceiver,
    src: Option<u32>,
}

/// The beacon of the due period, set by [`LanePort::send_due`] right
/// before the loop builds its frame.
struct BeaconFill {
    next: Option<LaneBeacon>,
}

impl SlotFill for BeaconFill {
    fn fill(&mut self, core: &mut PeriodicSender, _slot_ns: u64) {
        if let Some(b) = self.next.take() {
            if core.pending() == 0 {
                // Cannot fail: one 24-byte chunk in an empty queue.
                let _ = core.enqueue(LANE_PRODUCER, &b.encode());
            }
        }
    }
}

/// The port's receiver: every datagram checked by the core of its
/// tunnel, the beacons of one turn kept for [`LanePort::recv`].
struct BeaconSink {
    rx: Vec<Rx>,
    /// This turn's beacons with their tunnel's period.
    got: [(LaneBeacon, Nanos); RECV_BUDGET],
    n: usize,
    received: u64,
    refused: u64,
    lost: u64,
}

const NO_BEACON: LaneBeacon = LaneBeacon {
    src: 0,
    period_us: 0,
    barrier: 0,
    commit: 0,
};

impl FrameSink for BeaconSink {
    // The sink reads every datagram itself (`on_datagram`): a port takes
    // several tunnels on one socket, each with its own core.
    fn on_chunk(&mut self, _d: Delivery<'_>) {}
    fn on_frame(&mut self, _s: Sample) {}

    fn on_datagram(&mut self, _core: &mut PeriodicReceiver, st: &RxStamps, bytes: &[u8]) -> bool {
        let tunnel = match Frame::new_checked(bytes) {
            Ok(f) if !st.received.truncated => f.header().tunnel,
            _ => {
                self.refused += 1;
                return false;
            }
        };
        let Some(rx) = self.rx.iter_mut().find(|r| r.tunnel == tunnel) else {
            self.refused += 1;
            return false;
        };
        let lost = rx.core.stats().lost;
        let mut got = None;
        let ok = rx
            .core
            .handle_datagram(st.received.rx_ns, bytes, &mut |d| {
                if d.producer == LANE_PRODUCER && got.is_none() {
                    got = LaneBeacon::decode(d.data).ok();
                }
            })
            .is_ok();
        self.lost += rx.core.stats().lost - lost;
        let Some(b) = got.filter(|_| ok) else {
            self.refused += 1;
            return false;
        };
        if *rx.src.get_or_insert(b.src) != b.src || self.n == self.got.len() {
            self.refused += 1;
            return false;
        }
        self.got[self.n] = (b, rx.core.params().period_ns);
        self.n += 1;
        self.received += 1;
        true
    }
}

/// A process's or hop's end of the beacon tunnels: one lane socket, the
/// tunnel it sends on (one frame per period, always: an idle tunnel is
/// one the controller takes back), the tunnels it takes from, driven by a
/// lane loop ([`LaneLoop`]) that the caller's own event loop embeds (it
/// waits on [`LanePort::as_fd`] and calls [`LanePort::recv`] and
/// [`LanePort::send_due`] in its turn). Bounded work per call, no
/// allocation after [`LanePort::open`].
pub struct LanePort {
    lane: LaneLoop<BeaconFill, BeaconSink>,
    tx: Option<SenderId>,
    rx: ReceiverId,
    addr: SocketAddrV4,
    cap: BarrierCap,
    capped: u64,
}

/// Why a lane port could not open.
#[derive(Debug, thiserror::Error)]
pub enum LanePortError {
    /// The socket.
    #[error("lane socket: {0}")]
    Socket(#[from] SocketError),
    /// The lane loop.
    #[error("lane loop: {0}")]
    Loop(#[from] std::io::Error),
    /// A tunnel's parameters.
    #[error("tunnel {tunnel}: {source}")]
    Params {
        /// The tunnel.
        tunnel: u32,
        /// Why.
        source: xlane_lane::ParamsError,
    },
}

fn params(t: LaneTunnel) -> Result<TunnelParams, LanePortError> {
    let p = TunnelParams {
        tunnel: t.tunnel,
        period_ns: t.period_ns,
        max_packet: LANE_FRAME_LEN,
        schema: LANE_SCHEMA,
    };
    p.validate().map_err(|source| LanePortError::Params {
        tunnel: t.tunnel,
        source,
    })?;
    Ok(p)
}

impl LanePort {
    /// Opens the socket (non-blocking, express-marked); the first frame
    /// goes at the tunnel's first slot after `now` (the caller's clock, the
    /// one it passes to every call).
    pub fn open(cfg: &LanePortConfig, now: Nanos) -> Result<LanePort, LanePortError> {
        let sock = LaneSocket::open(&SocketConfig {
            dscp: cfg.dscp,
            nonblocking: true,
            rx_timestamps: false,
            join: cfg.join,
            multicast_if: cfg.multicast_if,
            ..SocketConfig::express(cfg.bind)
        })?;
        let addr = sock.local_addr()?;
        let mut lane = LaneLoop::new()?;
        let tx = match cfg.tx {
            Some((t, to)) => {
                let first = first_slot_after(now, t.period_ns);
                let core =
                    PeriodicSender::with_capacity(params(t)?, first, 4).map_err(|source| {
                        LanePortError::Params {
                            tunnel: t.tunnel,
                            source,
                        }
                    })?;
                Some(lane.add_sender(SenderSpec {
                    sock: sock.try_clone()?,
                    core,
                    dsts: vec![to],
                    until_ns: u64::MAX,
                    fill: BeaconFill { next: None },
                    seal: None,
                    xdp: None,
                }))
            }
            None => None,
        };
        let mut rx = Vec::with_capacity(cfg.rx.len());
        for &t in &cfg.rx {
            rx.push(Rx {
                tunnel: t.tunnel,
                core: PeriodicReceiver::new(params(t)?),
                src: None,
            });
        }
        // The loop's own core is never used: the sink checks each frame
        // with its tunnel's core.
        let unused = TunnelParams {
            tunnel: 0,
            period_ns: 1_000_000,
            max_packet: LANE_FRAME_LEN,
            schema: LANE_SCHEMA,
        };
        let rx = lane.add_receiver(ReceiverSpec {
            sock,
            core: PeriodicReceiver::new(unused),
            sink: BeaconSink {
                rx,
                got: [(NO_BEACON, 0); RECV_BUDGET],
                n: 0,
                received: 0,
                refused: 0,
                lost: 0,
            },
            open: None,
            xdp: None,
        })?;
        Ok(LanePort {
            lane,
            tx,
            rx,
            addr,
            cap: BarrierCap::new(cfg.window_ns),
            capped: 0,
        })
    }

    /// The descriptor to wait on: readable when a beacon waits.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.lane.as_fd()
    }

    /// The socket's address.
    pub fn local_addr(&self) -> Result<SocketAddrV4, SocketError> {
        Ok(self.addr)
    }

    /// The counters.
    pub fn stats(&self) -> LaneStats {
        let mut s = LaneStats {
            capped: self.capped,
            ..LaneStats::default()
        };
        if let Some(end) = self.tx.and_then(|id| self.lane.sender(id)) {
            s.sent = end.report.frames;
            s.send_errors = end.report.send_errors;
        }
        if let Some(end) = self.lane.receiver(self.rx) {
            s.received = end.spec.sink.received;
            s.refused = end.spec.sink.refused;
            s.lost = end.spec.sink.lost;
        }
        s
    }

    /// A regular packet carrying these barriers went out at `now`.
    pub fn on_regular_sent(&mut self, now: Nanos, barrier: u64, commit: u64) {
        self.cap.on_regular_sent(now, barrier, commit);
    }

    /// When the next beacon is due (`None`: this port sends none).
    pub fn poll_timeout(&self) -> Option<Nanos> {
        let end = self.lane.sender(self.tx?)?;
        Some(end.spec.core.poll_timeout())
    }

    /// Sends the beacon of the due period, if one is due at `now`, with
    /// the barriers `barriers()` gives (taken at the last moment), capped.
    pub fn send_due(&mut self, now: Nanos, src: u32, barriers: impl FnOnce() -> (u64, u64)) {
        let Some(end) = self.tx.and_then(|id| self.lane.sender_mut(id)) else {
            return;
        };
        if end.spec.core.poll_timeout() > now {
            return;
        }
        let (b, c) = barriers();
        let (cb, cc) = self.cap.cap(now, b, c);
        if (cb, cc) != (b, c) {
            self.capped += 1;
        }
        let period_us = (end.spec.core.params().period_ns / 1_000).min(u64::from(u32::MAX)) as u32;
        end.spec.fill.next = Some(LaneBeacon {
            src,
            period_us,
            barrier: cb,
            commit: cc.min(cb),
        });
        self.lane.send_due(now);
    }

    /// Reads waiting frames (at most the loop's budget) and hands each
    /// valid beacon to `take`, with the period its tunnel was granted (ns).
    pub fn recv(
        &mut self,
        now: Nanos,
        take: &mut dyn FnMut(LaneBeacon, Nanos),
    ) -> std::io::Result<()> {
        self.lane.recv_due(now)?;
        let Some(end) = self.lane.receiver_mut(self.rx) else {
            return Ok(());
        };
        let sink = &mut end.spec.sink;
        for &(b, period) in &sink.got[..sink.n] {
            take(b, period);
        }
        sink.n = 0;
        Ok(())
    }
}

/// Buckets over the window: a bucket per `W / BUCKETS`.
const BUCKETS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    /// The bucket's slot (time / width); `u64::MAX`: empty.
    slot: u64,
    /// The first (lowest) barriers sent in it.
    barrier: u64,
    commit: u64,
}

const EMPTY: Bucket = Bucket {
    slot: u64::MAX,
    barrier: 0,
    commit: 0,
};

/// The barriers of the regular packets sent in the last window, in
/// eight fixed buckets (no allocation): a lane beacon is capped at
/// the oldest of them. Conservative by up to one bucket: a packet sent
/// slightly more than `W` ago may still cap.
#[derive(Debug, Clone)]
pub struct BarrierCap {
    width: Nanos,
    buckets: [Bucket; BUCKETS],
}

impl BarrierCap {
    /// A cap over a window of `window_ns` (about the regular path's
    /// p99.9 delay).
    pub fn new(window_ns: Nanos) -> BarrierCap {
        BarrierCap {
            width: (window_ns / BUCKETS as u64).max(1),
            buckets: [EMPTY; BUCKETS],
        }
    }

    /// A regular packet carrying these barriers was sent at `now`
    /// (barriers never go back from one packet to the next).
    pub fn on_regular_sent(&mut self, now: Nanos, barrier: u64, commit: u64) {
        let slot = now / self.width;
        let b = &mut self.buckets[(slot % BUCKETS as u64) as usize];
        if b.slot != slot {
            *b = Bucket {
                slot,
                barrier,
                commit,
            };
        }
    }

    /// The barriers a lane beacon may carry at `now`, given the current
    /// ones.
    pub fn cap(&self, now: Nanos, barrier: u64, commit: u64) -> (u64, u64) {
        let slot = now / self.width;
        let oldest = slot.saturating_sub(BUCKETS as u64 - 1);
        self.buckets
            .iter()
            .filter(|b| b.slot != u64::MAX && b.slot >= oldest && b.slot <= slot)
            .fold((barrier, commit), |(x, y), b| {
                (x.min(b.barrier), y.min(b.commit))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_beacons_round_trip_and_refuse_table() {
        let m = LaneBeacon {
            src: 7,
            period_us: 100,
            barrier: 1_000,
            commit: 990,
        };
        assert_eq!(LaneBeacon::decode(&m.encode()), Ok(m));
        let mut bad = m.encode();
        // A commit barrier above the barrier.
        bad[16] = 0xff;
        bad[23] = 0xff;
        let cases: [(&[u8], LaneBeaconError); 3] = [
            (&[], LaneBeaconError::Length(0)),
            (&m.encode()[..23], LaneBeaconError::Length(23)),
            (
                &bad,
                LaneBeaconError::CommitAbove {
                    barrier: 1_000,
                    commit: u64::from_be_bytes([0xff, 0, 0, 0, 0, 0, 0x03, 0xff]),
                },
            ),
        ];
        for (b, want) in cases {
            assert_eq!(LaneBeacon::decode(b), Err(want), "{b:?}");
        }
    }

    /// Window 80, buckets of 10: (now, regular packet sent?, cap of the
    /// current barriers (b, b - 1) at now).
    #[test]
    fn the_cap_follows_the_oldest_regular_packet_in_the_window() {
        let mut c = BarrierCap::new(80);
        type Row = (Nanos, Option<(u64, u64)>, u64, (u64, u64));
        let rows: &[Row] = &[
            (0, None, 100, (100, 99)),            // nothing sent: no cap
            (5, Some((100, 99)), 120, (100, 99)), // capped at what is in flight
            (15, Some((110, 105)), 130, (100, 99)),
            (79, None, 150, (100, 99)),
            (80, None, 150, (110, 105)), // the first bucket left the window
            (95, None, 160, (160, 159)), // nothing in the window any more
            (96, Some((200, 190)), 210, (200, 190)),
            (97, Some((205, 195)), 210, (200, 190)), // same bucket: the first counts
        ];
        for (i, &(now, sent, b, want)) in rows.iter().enumerate() {
            if let Some((sb, sc)) = sent {
                c.on_regular_sent(now, sb, sc);
            }
            assert_eq!(c.cap(now, b, b - 1), want, "row {i}");
        }
    }
}
