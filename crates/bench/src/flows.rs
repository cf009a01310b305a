//! Periodic multicast flows in the testbed, one per configuration, and the
//! configurations compared in the benchmarks.
//!
//! A flow is one sender on a host and one receiver on each of several
//! hosts, joined to the flow's multicast group. Every frame carries one
//! chunk whose first 8 bytes are the frame's scheduled slot time, so the
//! receivers learn how late the sender was. Each accepted frame becomes one
//! [`FlowSample`].
//!
//! The flows of the configurations placed alike share one lane loop
//! ([`xlane_host::lane_loop::LaneLoop`]): on the lane core one thread at
//! `SCHED_FIFO` serves every sender and receiver of every emulated host,
//! as X-Lane's lane core does. The other configurations get one loop each
//! with their own placement, so each is measured with the same runtime and
//! differs only in marking, placement, scheduling and waiting.

use crate::qjump::QjumpLimiter;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use xlane_host::budget::CpuTimes;
use xlane_host::lane_loop::{
    FrameSink, LaneLoop, LoopStats, ReceiverSpec, SenderSpec, SlotFill, XdpId, XdpSend,
};
use xlane_host::runtime::{
    place_current_thread, Placement, Sample, SampleLog, SendReport, WaitMode,
};
use xlane_host::socket::realtime_ns;
use xlane_host::socket::{LaneSocket, SocketConfig};
use xlane_host::xdp::{PathMode, XdpConfig, XdpRings};
use xlane_lane::{PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_testbed::HostInfo;
use xlane_wire::Schema;

/// `SCHED_FIFO` priority of the lane loop (every tunnel end of the lane core).
pub const LANE_PRIORITY: i32 = 81;
/// `SCHED_FIFO` priority of the floor probe: above the lane threads, so
/// that its lateness counts only what the machine takes (hypervisor,
/// interrupts, softirqs, kernel threads above it), never the lane's own
/// work. Its few µs every 100 µs are its cost to the lane.
pub const FLOOR_PRIORITY: i32 = 90;

/// The configurations the benchmarks compare (X-Lane §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The lane: express class, lane threads pinned to the lane core at
    /// `SCHED_FIFO`, host measures applied.
    Xlane,
    /// The lane on its own rings: as `Xlane`, with each receiving host's
    /// frames steered by XDP to AF_XDP sockets, and the sender writing its
    /// frames into its host's AF_XDP transmit ring.
    XlaneXdp,
    /// As `XlaneXdp`, receiving through the rings but sending on the
    /// socket (what the receive ring alone gives).
    XlaneXdpRx,
    /// The lane's express class and dedicated core, but without the
    /// scheduling and interrupt measures: normal policy, no host tuning
    /// (X-Lane₀ of the paper).
    Xlane0,
    /// QJump: express priority and a host rate limit for its level, on a
    /// regular socket and an ordinary thread on a regular core.
    Qjump,
    /// User-space busy polling of a regular socket without isolation (the
    /// DPDK-like case): best-effort class, ordinary spinning threads on a
    /// regular core.
    BusyPoll,
    /// Default sockets and threads.
    Plain,
}

impl Variant {
    /// Every configuration, in report order.
    pub const ALL: [Variant; 7] = [
        Variant::Xlane,
        Variant::XlaneXdp,
        Variant::XlaneXdpRx,
        Variant::Xlane0,
        Variant::Qjump,
        Variant::BusyPoll,
        Variant::Plain,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Xlane => "xlane",
            Variant::XlaneXdp => "xlane-xdp",
            Variant::XlaneXdpRx => "xlane-xdp-rx",
            Variant::Xlane0 => "xlane0",
            Variant::Qjump => "qjump",
            Variant::BusyPoll => "busypoll",
            Variant::Plain => "plain",
        }
    }

    /// Parse a name.
    pub fn from_name(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == s)
    }

    /// Marked for the express class.
    pub fn express_class(self) -> bool {
        matches!(
            self,
            Variant::Xlane
                | Variant::XlaneXdpRx
                | Variant::XlaneXdp
                | Variant::Xlane0
                | Variant::Qjump
        )
    }

    /// Runs on the lane core.
    pub fn on_lane_core(self) -> bool {
        matches!(
            self,
            Variant::Xlane | Variant::XlaneXdpRx | Variant::XlaneXdp | Variant::Xlane0
        )
    }

    /// Applies the host measures while it runs.
    pub fn host_measures(self) -> bool {
        matches!(
            self,
            Variant::Xlane | Variant::XlaneXdpRx | Variant::XlaneXdp
        )
    }

    /// How its receivers read: AF_XDP rings or sockets.
    pub fn rx(self) -> PathMode {
        match self {
            Variant::XlaneXdpRx | Variant::XlaneXdp => PathMode::Xdp,
            _ => PathMode::Socket,
        }
    }

    /// Whether its sender writes into an AF_XDP transmit ring.
    pub fn xdp_tx(self) -> bool {
        self == Variant::XlaneXdp
    }
}

/// One flow to run.
#[derive(Clone, Debug)]
pub struct FlowPlan {
    /// Which configuration.
    pub variant: Variant,
    /// Name in reports (usually the variant's).
    pub name: String,
    /// Tunnel id.
    pub tunnel: u32,
    /// Destination: a multicast group every receiver joins, or (with one
    /// receiver) that receiver's unicast address; and the port.
    pub group: SocketAddrV4,
    /// DSCP to mark packets with instead of the configuration's (46 for
    /// express configurations, 0 otherwise); e.g. 40 for the second express
    /// sub-lane, or 46 on a plain configuration for express-marked traffic
    /// from an ordinary thread.
    pub dscp: Option<u8>,
    /// Period π, ns.
    pub period_ns: u64,
    /// Payload bytes per message (8..=20).
    pub message_len: usize,
    /// The lane core.
    pub lane_core: usize,
    /// The regular core ordinary threads are pinned to (none: unpinned).
    pub regular_core: Option<usize>,
    /// How the lane's threads wait (`Xlane` and the AF_XDP ones only; busypoll
    /// always spins, the others always sleep).
    pub lane_mode: WaitMode,
    /// The sending host.
    pub sender: HostInfo,
    /// The receiving hosts.
    pub receivers: Vec<HostInfo>,
    /// First slot, `CLOCK_REALTIME` ns.
    pub first_slot_ns: u64,
    /// The sender stops before this time.
    pub until_ns: u64,
    /// Receivers keep listening this long after `until_ns` for frames
    /// still in queues.
    pub grace_ns: u64,
    /// QJump's host rate limit (for `Qjump`).
    pub qjump: Option<QjumpLimiter>,
    /// Authenticated frames with this key (`Xlane` only): the sender seals
    /// each frame, every receiver checks it before its core sees it.
    pub mac: Option<xlane_auth::Key>,
    /// Ask the sender's kernel for transmit stamps (the frame handed to
    /// the sending host's device, after its qdisc), read back by the lane
    /// loop before the sender's next frame: the per-stage breakdown's
    /// split of the network part ([`FlowSample::send_driver_ns`]).
    pub tx_stamps: bool,
}

/// One received frame of a flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSample {
    /// Stamps of the frame.
    pub sample: Sample,
    /// The slot the sender was asked to send it in.
    pub slot_ns: u64,
    /// Which receiver (index into the plan's receivers).
    pub receiver: u16,
    /// When the sender's system call for this frame returned (0: not
    /// known). On veth the call carries the frame through the emulated
    /// network, so its receivers may hold it before the call returns.
    pub send_returned_ns: u64,
    /// The sending kernel's transmit stamp: the frame handed to the
    /// sending host's device, after its qdisc (0: not asked for, or not
    /// read).
    pub send_driver_ns: u64,
}

impl FlowSample {
    /// One-way latency to the receiving thread.
    pub fn latency_ns(&self) -> u64 {
        self.sample.latency_ns()
    }
    /// The network part: until the kernel's receive stamp.
    pub fn network_ns(&self) -> u64 {
        self.sample.kernel_rx_ns.saturating_sub(self.sample.send_ns)
    }
    /// How late the sender stamped the frame after its slot.
    pub fn sender_late_ns(&self) -> u64 {
        self.sample.send_ns.saturating_sub(self.slot_ns)
    }
    /// From the kernel's receive stamp to the return of the sender's
    /// system call, when that returned later and before the receiving
    /// thread held the frame: the time a receiver on the sender's own
    /// thread waits for the sender's call to finish carrying the frame's
    /// other copies. An emulation's share: on separate hosts the
    /// receiving core does not wait for the sending one.
    pub fn own_send_wait_ns(&self) -> u64 {
        self.send_returned_ns
            .min(self.sample.user_rx_ns)
            .saturating_sub(self.sample.kernel_rx_ns)
    }
    /// From the later of the kernel's receive stamp and the sender's
    /// return to the receiving thread holding the frame: the receive
    /// path's own time (waking or polling, `recvmmsg`, the other sockets
    /// read before this one).
    pub fn read_ns(&self) -> u64 {
        self.sample
            .user_rx_ns
            .saturating_sub(self.sample.kernel_rx_ns)
            .saturating_sub(self.own_send_wait_ns())
    }
}

/// What one flow produced.
#[derive(Clone, Debug, Default)]
pub struct FlowResult {
    /// Name in reports.
    pub name: String,
    /// Frames received, every receiver.
    pub samples: Vec<FlowSample>,
    /// The sender's report.
    pub sent: SendReport,
    /// Slots in the run.
    pub slots: u64,
    /// Slots the QJump limiter held back.
    pub rate_limited: u64,
    /// Datagrams the receivers refused (their core, or the MAC check).
    pub refused: u64,
    /// Receivers in the flow.
    pub receivers: u64,
    /// Datagrams the kernel dropped at the receivers' sockets (buffer
    /// full) or AF_XDP rings (ring full, no free frame).
    pub socket_drops: u64,
    /// Datagrams the receivers read from AF_XDP rings.
    pub xdp_datagrams: u64,
}

impl FlowResult {
    /// Frames sent × receivers − frames received.
    pub fn lost(&self) -> u64 {
        (self.sent.frames * self.receivers).saturating_sub(self.samples.len() as u64)
    }
}

/// Why a flow failed.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// Entering a host's namespace failed.
    #[error("testbed: {0}")]
    Testbed(#[from] xlane_testbed::TestbedError),
    /// A socket could not be set up.
    #[error("{flow}: socket on {host}: {source}")]
    Socket {
        /// The flow.
        flow: String,
        /// The host's namespace.
        host: String,
        /// Cause.
        source: xlane_host::socket::SocketError,
    },
    /// The AF_XDP path could not be set up.
    #[error("{flow}: AF_XDP path on {host}: {source}")]
    Xdp {
        /// The flow.
        flow: String,
        /// The host's namespace.
        host: String,
        /// Cause.
        source: xlane_host::xdp::XdpError,
    },
    /// A thread failed.
    #[error("{flow}: {role} on {host}: {msg}")]
    Thread {
        /// The flow.
        flow: String,
        /// sender or receiver.
        role: &'static str,
        /// The host's namespace.
        host: String,
        /// What went wrong.
        msg: String,
    },
}

impl FlowPlan {
    fn params(&self) -> TunnelParams {
        TunnelParams {
            tunnel: self.tunnel,
            period_ns: self.period_ns,
            max_packet: Schema::Chunk26.frame_len(4),
            schema: Schema::Chunk26,
        }
    }

    fn mode(&self) -> WaitMode {
        match self.variant {
            Variant::Xlane | Variant::XlaneXdpRx | Variant::XlaneXdp => self.lane_mode,
            Variant::BusyPoll => WaitMode::BusyPoll,
            _ => WaitMode::Interrupt,
        }
    }

    fn socket(&self, bind: SocketAddrV4) -> SocketConfig {
        let mut c = if self.variant.express_class() {
            SocketConfig::express(bind)
        } else {
            SocketConfig::plain(bind)
        };
        if let Some(d) = self.dscp {
            c.dscp = d;
        }
        c.nonblocking = true;
        c
    }

    /// Where this configuration's lane loop runs.
    fn placement(&self) -> Placement {
        match self.variant {
            Variant::Xlane | Variant::XlaneXdpRx | Variant::XlaneXdp => Placement {
                core: Some(self.lane_core),
                fifo: Some(LANE_PRIORITY),
            },
            Variant::Xlane0 => Placement {
                core: Some(self.lane_core),
                fifo: None,
            },
            _ => Placement {
                core: self.regular_core,
                fifo: None,
            },
        }
    }

    fn socket_err(&self, host: &HostInfo, e: xlane_host::socket::SocketError) -> FlowError {
        FlowError::Socket {
            flow: self.name.clone(),
            host: host.netns.clone(),
            source: e,
        }
    }

    /// A receiver's socket, opened in its host's namespace and joined to
    /// the flow's group.
    fn receiver_socket(&self, host: &HostInfo) -> Result<LaneSocket, FlowError> {
        let _ns = xlane_testbed::enter_netns(&host.netns)?;
        let multicast = self.group.ip().is_multicast();
        let bind_ip = if multicast {
            Ipv4Addr::UNSPECIFIED
        } else {
            host.addr
        };
        let mut sc = self.socket(SocketAddrV4::new(bind_ip, self.group.port()));
        if multicast {
            sc.join = Some((*self.group.ip(), host.addr));
        }
        sc.rcvbuf = 1 << 20;
        LaneSocket::open(&sc).map_err(|e| self.socket_err(host, e))
    }

    /// The sender's socket, opened in its host's namespace.
    fn sender_socket(&self) -> Result<LaneSocket, FlowError> {
        let host = &self.sender;
        let _ns = xlane_testbed::enter_netns(&host.netns)?;
        let mut sc = self.socket(SocketAddrV4::new(host.addr, 0));
        sc.multicast_if = Some(host.addr);
        sc.rx_timestamps = false;
        let mut sock = LaneSocket::open(&sc).map_err(|e| self.socket_err(host, e))?;
        if self.tx_stamps {
            sock.enable_tx_timestamps()
                .map_err(|e| self.socket_err(host, e))?;
        }
        Ok(sock)
    }

    /// The AF_XDP path of `host` in this loop: opened on the host's
    /// interface (in its namespace) the first time, then shared. The
    /// program steers one DSCP, so flows on one host must agree on it.
    fn xdp_path<F: SlotFill, S: FrameSink>(
        &self,
        role: &'static str,
        host: &HostInfo,
        lane: &mut LaneLoop<F, S>,
        paths: &mut Vec<(String, u8, XdpId)>,
    ) -> Result<XdpId, FlowError> {
        let dscp = self.dscp.unwrap_or(xlane_host::socket::DSCP_EXPRESS);
        if let Some((_, d, id)) = paths.iter().find(|(ns, _, _)| *ns == host.netns) {
            if *d != dscp {
                return Err(self.thread_err(
                    role,
                    host,
                    format!("AF_XDP path steers DSCP {d}, this flow is marked {dscp}"),
                ));
            }
            return Ok(*id);
        }
        let rx = {
            let _ns = xlane_testbed::enter_netns(&host.netns)?;
            XdpRings::open(&XdpConfig {
                iface: host.iface.clone(),
                dscp,
                mode: None,
            })
            .map_err(|source| FlowError::Xdp {
                flow: self.name.clone(),
                host: host.netns.clone(),
                source,
            })?
        };
        let id = lane
            .add_xdp(rx)
            .map_err(|e| self.thread_err(role, host, e))?;
        paths.push((host.netns.clone(), dscp, id));
        Ok(id)
    }

    /// The sender's transmit ring: its host's AF_XDP path, and the
    /// frames' addresses resolved in the host's namespace.
    fn xdp_send<F: SlotFill, S: FrameSink>(
        &self,
        sock: &LaneSocket,
        lane: &mut LaneLoop<F, S>,
        paths: &mut Vec<(String, u8, XdpId)>,
    ) -> Result<XdpSend, FlowError> {
        let host = &self.sender;
        let path = self.xdp_path("sender", host, lane, paths)?;
        let src = sock
            .local_addr()
            .map_err(|e| self.thread_err("sender", host, e))?;
        let dscp = self.dscp.unwrap_or(xlane_host::socket::DSCP_EXPRESS);
        let rings = lane
            .xdp(path)
            .ok_or_else(|| self.thread_err("sender", host, "its AF_XDP path is gone"))?;
        let addrs = {
            let _ns = xlane_testbed::enter_netns(&host.netns)?;
            rings
                .frame_addrs(src, &[self.group], dscp)
                .map_err(|e| self.thread_err("sender", host, e))?
        };
        Ok(XdpSend { path, addrs })
    }

    fn expected_frames(&self) -> usize {
        (self.until_ns.saturating_sub(self.first_slot_ns) / self.period_ns) as usize + 16
    }

    fn thread_err(&self, role: &'static str, host: &HostInfo, msg: impl ToString) -> FlowError {
        FlowError::Thread {
            flow: self.name.clone(),
            role,
            host: host.netns.clone(),
            msg: msg.to_string(),
        }
    }
}

/// One lane loop of a run: the thread that served every tunnel end of the
/// configurations placed alike (one per placement: the lane core at
/// `SCHED_FIFO`, the lane core at normal priority, a regular core, a
/// spinning regular core).
#[derive(Clone, Debug, Default)]
pub struct LoopReport {
    /// The flows it served (indices into the plans).
    pub flows: Vec<usize>,
    /// Its core (`None`: unpinned).
    pub core: Option<usize>,
    /// Whether it polled (busy-poll) instead of sleeping.
    pub polling: bool,
    /// Its counters, with the thread's CPU time and switches.
    pub stats: LoopStats,
}

/// What [`run_flows`] produced.
#[derive(Clone, Debug, Default)]
pub struct FlowRun {
    /// One result per plan, in the plans' order.
    pub flows: Vec<FlowResult>,
    /// One report per lane loop.
    pub loops: Vec<LoopReport>,
    /// Wall time from the first loop's start to the last one's end, ns.
    pub wall_ns: u64,
    /// The lane core's `/proc/stat` times over the run (`None` if unreadable).
    pub lane_cpu: Option<CpuTimes>,
    /// How much later than planned every flow's slots ran, ns (set-up
    /// overran the plans' lead; 0 when it did not).
    pub start_shift_ns: u64,
}

/// What one flow's sender does at its slot: put the slot time in the
/// frame's one chunk, unless QJump's limiter holds it back.
struct FlowFill {
    msg: [u8; 20],
    len: usize,
    limiter: Option<QjumpLimiter>,
    limited: u64,
    /// When each frame's send call returned, by sequence number
    /// (preallocated: no allocation in the loop).
    returned_by_seq: Vec<u64>,
    /// Each frame's transmit stamp, by the kernel's datagram number (the
    /// frame's sequence number: one datagram per frame).
    driver_by_seq: Vec<u64>,
}

impl SlotFill for FlowFill {
    fn fill(&mut self, c: &mut PeriodicSender, slot: u64) {
        if let Some(l) = self.limiter.as_mut() {
            if !l.admit(slot) {
                self.limited += 1;
                return;
            }
        }
        self.msg[..8].copy_from_slice(&slot.to_be_bytes());
        // A one-chunk frame per period: the queue never fills.
        let _ = c.enqueue(0, &self.msg[..self.len]);
    }
    fn sent(&mut self, r: &SendReport) {
        if let Some(t) = self.returned_by_seq.get_mut(r.last_seq as usize) {
            *t = r.last_returned_ns;
        }
    }
    fn tx_stamp(&mut self, st: xlane_host::socket::TxStamp) {
        if let (Some(t), Some(ns)) = (self.driver_by_seq.get_mut(st.id as usize), st.software_ns) {
            *t = ns;
        }
    }
}

/// One receiver of a flow: every accepted frame's stamps, and the slot
/// its chunk names, by sequence number (preallocated: no allocation in
/// the loop).
struct FlowSink {
    flow: usize,
    receiver: u16,
    log: SampleLog,
    slot_by_seq: Vec<u64>,
}

impl FrameSink for FlowSink {
    fn on_chunk(&mut self, d: xlane_lane::Delivery<'_>) {
        if let (Some(slot), Some(b)) = (self.slot_by_seq.get_mut(d.seq as usize), d.data.get(..8)) {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            *slot = u64::from_be_bytes(a);
        }
    }
    fn on_frame(&mut self, s: Sample) {
        self.log.push(s);
    }
}

/// Placement of a configuration's loop: core, `SCHED_FIFO` priority, wait mode.
type Group = (Option<usize>, Option<i32>, WaitMode);

fn group_of_plan(p: &FlowPlan) -> Group {
    let place = p.placement();
    (place.core, place.fifo, p.mode())
}

/// Run several flows at once and return their results in the order of
/// `plans`. The flows placed alike share one lane loop (one thread serving
/// all their senders and receivers, in every emulated host). Blocks until
/// every sender passed its `until_ns` and every receiver its grace time;
/// `stop` ends everything early. Set-up (sockets, AF_XDP paths) happens
/// before the first slot; if it overran the plans' first slot, every
/// flow's slots move later by the same amount ([`FlowRun::start_shift_ns`]).
pub fn run_flows(plans: &[FlowPlan], stop: &AtomicBool) -> Result<FlowRun, FlowError> {
    let mut groups: Vec<(Group, Vec<usize>)> = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        let g = group_of_plan(p);
        match groups.iter_mut().find(|(k, _)| *k == g) {
            Some((_, v)) => v.push(i),
            None => groups.push((g, vec![i])),
        }
    }
    let lane_core = plans.first().map(|p| p.lane_core);
    let cpu0 = lane_core.and_then(CpuTimes::read);
    let t0 = realtime_ns();
    let gate = StartGate {
        barrier: std::sync::Barrier::new(groups.len()),
        shift: std::sync::Mutex::new(None),
        first_ns: plans.iter().map(|p| p.first_slot_ns).min().unwrap_or(0),
    };
    let gate = &gate;
    let outs = thread::scope(|s| {
        let handles: Vec<_> = groups
            .iter()
            .map(|(_, idx)| s.spawn(move || run_group(plans, idx, stop, gate)))
            .collect();
        let mut outs = Vec::new();
        for h in handles {
            match h.join() {
                Ok(r) => outs.push(r),
                Err(_) => outs.push(Err(FlowError::Thread {
                    flow: String::new(),
                    role: "lane loop",
                    host: String::new(),
                    msg: "panicked".into(),
                })),
            }
        }
        outs
    });
    let wall_ns = realtime_ns().saturating_sub(t0);
    let lane_cpu = match (lane_core.and_then(CpuTimes::read), cpu0) {
        (Some(b), Some(a)) => Some(b.since(&a)),
        _ => None,
    };
    let mut run = FlowRun {
        flows: plans
            .iter()
            .map(|p| FlowResult {
                name: p.name.clone(),
                slots: p.until_ns.saturating_sub(p.first_slot_ns) / p.period_ns,
                receivers: p.receivers.len() as u64,
                ..FlowResult::default()
            })
            .collect(),
        loops: Vec::new(),
        wall_ns,
        lane_cpu,
        start_shift_ns: gate.shift.lock().map_or(0, |g| g.unwrap_or(0)),
    };
    let mut first_err = None;
    for o in outs {
        match o {
            Ok(g) => {
                for (fi, rep, limited) in g.sent {
                    run.flows[fi].sent = rep;
                    run.flows[fi].rate_limited = limited;
                }
                for (fi, samples, refused, drops, xdp) in g.received {
                    run.flows[fi].samples.extend(samples);
                    run.flows[fi].refused += refused;
                    run.flows[fi].socket_drops += drops;
                    run.flows[fi].xdp_datagrams += xdp;
                }
                run.loops.push(g.report);
            }
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(run),
    }
}

/// A receiver's flow, samples, refusals, drops and datagrams read from
/// AF_XDP rings.
type Received = (usize, Vec<FlowSample>, u64, u64, u64);

struct GroupOut {
    sent: Vec<(usize, SendReport, u64)>,
    received: Vec<Received>,
    report: LoopReport,
}

/// One lane loop: opens every socket of its flows in their hosts'
/// namespaces, places itself, and runs until the last grace time.
/// Where the loops of a run meet before their first slot: every loop has
/// set up its ends, and the run's slots move later if setting up took
/// longer than the plans allowed (a loaded machine), by the same amount for
/// every flow.
struct StartGate {
    barrier: std::sync::Barrier,
    shift: std::sync::Mutex<Option<u64>>,
    /// The earliest first slot of the run's plans.
    first_ns: u64,
}

/// Least time between the end of set-up and the first slot.
const START_LEAD_NS: u64 = 20_000_000;

impl StartGate {
    /// Waits for every loop, then the run's shift (the same for all).
    fn pass(&self) -> u64 {
        self.barrier.wait();
        let mut g = self.shift.lock().unwrap_or_else(|e| e.into_inner());
        *g.get_or_insert_with(|| (realtime_ns() + START_LEAD_NS).saturating_sub(self.first_ns))
    }
}

/// A loop with its receivers set up, and its senders' sockets (with
/// their transmit rings, if they write into one).
type SetUp = (
    LaneLoop<FlowFill, FlowSink>,
    Vec<(String, u8, XdpId)>,
    Vec<(LaneSocket, Option<XdpSend>)>,
);

/// One lane loop: places itself, opens every socket (and AF_XDP path) of
/// its flows in their hosts' namespaces, meets the other loops at the
/// gate, and runs until the last grace time.
fn run_group(
    plans: &[FlowPlan],
    idx: &[usize],
    stop: &AtomicBool,
    gate: &StartGate,
) -> Result<GroupOut, FlowError> {
    let setup = set_up_group(plans, idx);
    // Every loop passes the gate, even one whose set-up failed.
    let shift = gate.pass();
    let (mut lane, paths, socks) = setup?;
    for (&fi, (sock, xdp)) in idx.iter().zip(socks) {
        let plan = &plans[fi];
        let host = &plan.sender;
        let core = PeriodicSender::new(plan.params(), plan.first_slot_ns + shift)
            .map_err(|e| plan.thread_err("sender", host, e))?;
        lane.add_sender(SenderSpec {
            sock,
            core,
            dsts: vec![plan.group],
            until_ns: plan.until_ns + shift,
            fill: FlowFill {
                msg: [0u8; 20],
                len: plan.message_len.clamp(8, 20),
                limiter: plan.qjump,
                limited: 0,
                returned_by_seq: vec![0u64; plan.expected_frames()],
                driver_by_seq: vec![
                    0u64;
                    if plan.tx_stamps {
                        plan.expected_frames()
                    } else {
                        0
                    }
                ],
            },
            seal: plan
                .mac
                .as_ref()
                .map(|k| xlane_auth::Sealer::new(plan.tunnel, k.clone(), plan.tunnel)),
            xdp,
        });
    }
    let first = &plans[idx[0]];
    let end = idx
        .iter()
        .map(|&i| plans[i].until_ns + plans[i].grace_ns)
        .max()
        .unwrap_or(0)
        + shift;
    lane.run(stop, end, first.mode())
        .map_err(|e| first.thread_err("lane loop", &first.sender, e))?;
    collect_group(plans, idx, lane, &paths, shift)
}

fn set_up_group(plans: &[FlowPlan], idx: &[usize]) -> Result<SetUp, FlowError> {
    let first = &plans[idx[0]];
    // Set up where the loop will run: on a loaded machine the lane core
    // is the one with time to spare.
    place_current_thread(first.placement())
        .map_err(|e| first.thread_err("lane loop", &first.sender, e))?;
    let mut lane: LaneLoop<FlowFill, FlowSink> =
        LaneLoop::new().map_err(|e| first.thread_err("lane loop", &first.sender, e))?;
    // One AF_XDP path per receiving host, shared by the flows on it.
    let mut paths: Vec<(String, u8, XdpId)> = Vec::new();
    for &fi in idx {
        let plan = &plans[fi];
        for (ri, host) in plan.receivers.iter().enumerate() {
            let sock = plan.receiver_socket(host)?;
            let xdp = match plan.variant.rx() {
                PathMode::Socket => None,
                PathMode::Xdp => Some(plan.xdp_path("receiver", host, &mut lane, &mut paths)?),
            };
            let cap = plan.expected_frames();
            lane.add_receiver(ReceiverSpec {
                sock,
                core: PeriodicReceiver::new(plan.params()),
                sink: FlowSink {
                    flow: fi,
                    receiver: ri as u16,
                    log: SampleLog::with_capacity(cap),
                    slot_by_seq: vec![0u64; cap],
                },
                open: plan.mac.as_ref().map(|k| {
                    xlane_auth::Opener::new(xlane_auth::KeyRing::from_pairs(&[(
                        plan.tunnel,
                        k.clone(),
                    )]))
                }),
                xdp,
            })
            .map_err(|e| plan.thread_err("receiver", host, e))?;
        }
    }
    let mut socks = Vec::with_capacity(idx.len());
    for &fi in idx {
        let plan = &plans[fi];
        let sock = plan.sender_socket()?;
        let xdp = if plan.variant.xdp_tx() {
            Some(plan.xdp_send(&sock, &mut lane, &mut paths)?)
        } else {
            None
        };
        socks.push((sock, xdp));
    }
    Ok((lane, paths, socks))
}

/// What a loop's ends saw, once it stopped.
fn collect_group(
    plans: &[FlowPlan],
    idx: &[usize],
    mut lane: LaneLoop<FlowFill, FlowSink>,
    paths: &[(String, u8, XdpId)],
    shift: u64,
) -> Result<GroupOut, FlowError> {
    let first = &plans[idx[0]];
    let stats = lane.stats();
    // Ring drops per host, charged to the first flow received there.
    let mut ring_drops: Vec<(String, u64)> = paths
        .iter()
        .map(|(ns, _, id)| {
            (
                ns.clone(),
                lane.xdp(*id).map_or(0, |x| x.stats().ring_drops),
            )
        })
        .collect();
    let (senders, receivers) = lane.into_ends();
    // (flow, send call returns, transmit stamps) by sequence number.
    let mut by_seq: Vec<(usize, Vec<u64>, Vec<u64>)> = Vec::with_capacity(idx.len());
    let sent = idx
        .iter()
        .zip(senders)
        .map(|(&fi, s)| {
            by_seq.push((fi, s.spec.fill.returned_by_seq, s.spec.fill.driver_by_seq));
            (fi, s.report, s.spec.fill.limited)
        })
        .collect();
    let received = receivers
        .into_iter()
        .map(|r| {
            let plan = &plans[r.spec.sink.flow];
            let slots = &r.spec.sink.slot_by_seq;
            let (returned, driver) = by_seq
                .iter()
                .find(|(fi, _, _)| *fi == r.spec.sink.flow)
                .map_or((&[][..], &[][..]), |(_, a, b)| (&a[..], &b[..]));
            let samples = r
                .spec
                .sink
                .log
                .samples()
                .iter()
                .filter(|x| x.send_ns >= plan.first_slot_ns + shift)
                .map(|&sample| FlowSample {
                    sample,
                    slot_ns: slots.get(sample.seq as usize).copied().unwrap_or(0),
                    receiver: r.spec.sink.receiver,
                    send_returned_ns: returned.get(sample.seq as usize).copied().unwrap_or(0),
                    send_driver_ns: driver.get(sample.seq as usize).copied().unwrap_or(0),
                })
                .collect();
            let host = &plan.receivers[r.spec.sink.receiver as usize].netns;
            let ring = ring_drops
                .iter_mut()
                .find(|(ns, _)| ns == host)
                .map_or(0, |(_, d)| std::mem::take(d));
            let drops = r.spec.sock.drops().unwrap_or(0) + ring;
            // Refused by the core, or before it by the MAC check.
            let refused = r.report.refused + r.report.unauthenticated;
            (r.spec.sink.flow, samples, refused, drops, r.report.xdp)
        })
        .collect();
    Ok(GroupOut {
        sent,
        received,
        report: LoopReport {
            flows: idx.to_vec(),
            core: first.placement().core,
            polling: first.mode() == WaitMode::BusyPoll,
            stats,
        },
    })
}

/// A flow's result from `(send, kernel receive, user receive)` stamps of
/// one receiver, `frames` sent: the analysis steps' tests build their
/// degenerate runs with it.
#[cfg(test)]
pub(crate) fn flow_for_tests(name: &str, frames: u64, stamps: &[(u64, u64, u64)]) -> FlowResult {
    FlowResult {
        name: name.into(),
        samples: stamps
            .iter()
            .enumerate()
            .map(|(i, &(send_ns, kernel_rx_ns, user_rx_ns))| FlowSample {
                sample: Sample {
                    seq: i as u64,
                    send_ns,
                    kernel_rx_ns,
                    user_rx_ns,
                },
                slot_ns: send_ns,
                receiver: 0,
                send_returned_ns: 0,
                send_driver_ns: 0,
            })
            .collect(),
        sent: SendReport {
            frames,
            ..SendReport::default()
        },
        receivers: 1,
        ..FlowResult::default()
    }
}
