//! Periodic multicast flows in the testbed, one per configuration, and the
//! configurations compared in the benchmarks.
//!
//! A flow is one sender on a host and one receiver on each of several
//! hosts, joined to the flow's multicast group. Every frame carries one
//! chunk whose first 8 bytes are the frame's scheduled slot time, so the
//! receivers learn how late the sender was. Each accepted frame becomes one
//! [`FlowSample`].

use crate::qjump::QjumpLimiter;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use xlane_host::runtime::{
    place_current_thread, Placement, ReceiverLane, RecvReport, RuntimeError, Sample, SampleLog,
    SendReport, SenderLane, WaitMode,
};
use xlane_host::socket::{LaneSocket, SocketConfig};
use xlane_lane::{PeriodicReceiver, PeriodicSender, TunnelParams};
use xlane_testbed::HostInfo;
use xlane_wire::Schema;

/// `SCHED_FIFO` priority of lane senders.
pub const SENDER_PRIORITY: i32 = 81;
/// `SCHED_FIFO` priority of lane receivers.
pub const RECEIVER_PRIORITY: i32 = 80;
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
    /// All five, in report order.
    pub const ALL: [Variant; 5] = [
        Variant::Xlane,
        Variant::Xlane0,
        Variant::Qjump,
        Variant::BusyPoll,
        Variant::Plain,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Xlane => "xlane",
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
        matches!(self, Variant::Xlane | Variant::Xlane0 | Variant::Qjump)
    }

    /// Runs on the lane core.
    pub fn on_lane_core(self) -> bool {
        matches!(self, Variant::Xlane | Variant::Xlane0)
    }

    /// Applies the host measures while it runs.
    pub fn host_measures(self) -> bool {
        self == Variant::Xlane
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
    /// How the lane's threads wait (`Xlane` only; busypoll always spins,
    /// the others always sleep).
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
    /// Datagrams the receivers refused.
    pub refused: u64,
    /// Receivers in the flow.
    pub receivers: u64,
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
            Variant::Xlane => self.lane_mode,
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
        c.nonblocking = self.mode() == WaitMode::BusyPoll;
        c
    }

    fn place(&self, fifo: i32) -> Result<(), RuntimeError> {
        let p = match self.variant {
            Variant::Xlane => Placement {
                core: Some(self.lane_core),
                fifo: Some(fifo),
            },
            Variant::Xlane0 => Placement {
                core: Some(self.lane_core),
                fifo: None,
            },
            _ => Placement {
                core: self.regular_core,
                fifo: None,
            },
        };
        place_current_thread(p)
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

struct RecvOut {
    flow: usize,
    samples: Vec<FlowSample>,
    report: RecvReport,
}

/// Run several flows at once (each with its own sender and receivers) and
/// return their results in the order of `plans`. Blocks until every
/// sender passed its `until_ns` and every receiver its grace time; `stop`
/// ends everything early.
pub fn run_flows(plans: &[FlowPlan], stop: &AtomicBool) -> Result<Vec<FlowResult>, FlowError> {
    thread::scope(|s| {
        let mut recv_handles = Vec::new();
        for (fi, plan) in plans.iter().enumerate() {
            for (ri, host) in plan.receivers.iter().enumerate() {
                recv_handles.push(s.spawn(move || receive(fi, ri, plan, host, stop)));
            }
        }
        // Senders start once the receivers have joined their groups; the
        // first slot lies far enough ahead for that.
        thread::sleep(std::time::Duration::from_millis(30));
        let send_handles: Vec<_> = plans
            .iter()
            .map(|plan| s.spawn(move || send(plan, stop)))
            .collect();
        let mut results: Vec<FlowResult> = plans
            .iter()
            .map(|p| FlowResult {
                name: p.name.clone(),
                slots: p.until_ns.saturating_sub(p.first_slot_ns) / p.period_ns,
                receivers: p.receivers.len() as u64,
                ..FlowResult::default()
            })
            .collect();
        let mut first_err = None;
        for (fi, h) in send_handles.into_iter().enumerate() {
            match h.join() {
                Ok(Ok((rep, limited))) => {
                    results[fi].sent = rep;
                    results[fi].rate_limited = limited;
                }
                Ok(Err(e)) => {
                    stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    stop.store(true, Ordering::Relaxed);
                    first_err.get_or_insert(plans[fi].thread_err(
                        "sender",
                        &plans[fi].sender,
                        "panicked",
                    ));
                }
            }
        }
        for h in recv_handles {
            match h.join() {
                Ok(Ok(o)) => {
                    results[o.flow].samples.extend(o.samples);
                    results[o.flow].refused += o.report.refused;
                }
                Ok(Err(e)) => {
                    first_err.get_or_insert(e);
                }
                Err(_) => {
                    first_err.get_or_insert(FlowError::Thread {
                        flow: String::new(),
                        role: "receiver",
                        host: String::new(),
                        msg: "panicked".into(),
                    });
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(results),
        }
    })
}

fn receive(
    fi: usize,
    ri: usize,
    plan: &FlowPlan,
    host: &HostInfo,
    stop: &AtomicBool,
) -> Result<RecvOut, FlowError> {
    let _ns = xlane_testbed::enter_netns(&host.netns)?;
    let multicast = plan.group.ip().is_multicast();
    let bind_ip = if multicast {
        Ipv4Addr::UNSPECIFIED
    } else {
        host.addr
    };
    let mut sc = plan.socket(SocketAddrV4::new(bind_ip, plan.group.port()));
    if multicast {
        sc.join = Some((*plan.group.ip(), host.addr));
    }
    sc.recv_timeout_us = 20_000;
    sc.rcvbuf = 1 << 20;
    let mut sock = LaneSocket::open(&sc).map_err(|e| FlowError::Socket {
        flow: plan.name.clone(),
        host: host.netns.clone(),
        source: e,
    })?;
    plan.place(RECEIVER_PRIORITY)
        .map_err(|e| plan.thread_err("receiver", host, e))?;
    let cap = plan.expected_frames();
    let mut log = SampleLog::with_capacity(cap);
    // Slot of every frame, by sequence number: filled by the delivery
    // callback, preallocated so the loop does not allocate.
    let mut slot_by_seq = vec![0u64; cap];
    let mut lane = ReceiverLane::new(&mut sock, PeriodicReceiver::new(plan.params()));
    let report = lane
        .run(stop, plan.until_ns + plan.grace_ns, &mut log, &mut |d| {
            if let (Some(slot), Some(b)) = (slot_by_seq.get_mut(d.seq as usize), d.data.get(..8)) {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                *slot = u64::from_be_bytes(a);
            }
        })
        .map_err(|e| plan.thread_err("receiver", host, e))?;
    let samples = log
        .samples()
        .iter()
        .filter(|x| x.send_ns >= plan.first_slot_ns)
        .map(|&sample| FlowSample {
            sample,
            slot_ns: slot_by_seq.get(sample.seq as usize).copied().unwrap_or(0),
            receiver: ri as u16,
        })
        .collect();
    Ok(RecvOut {
        flow: fi,
        samples,
        report,
    })
}

fn send(plan: &FlowPlan, stop: &AtomicBool) -> Result<(SendReport, u64), FlowError> {
    let host = &plan.sender;
    let _ns = xlane_testbed::enter_netns(&host.netns)?;
    let mut sc = plan.socket(SocketAddrV4::new(host.addr, 0));
    sc.multicast_if = Some(host.addr);
    sc.rx_timestamps = false;
    let sock = LaneSocket::open(&sc).map_err(|e| FlowError::Socket {
        flow: plan.name.clone(),
        host: host.netns.clone(),
        source: e,
    })?;
    plan.place(SENDER_PRIORITY)
        .map_err(|e| plan.thread_err("sender", host, e))?;
    let core = PeriodicSender::new(plan.params(), plan.first_slot_ns)
        .map_err(|e| plan.thread_err("sender", host, e))?;
    let dsts = [plan.group];
    let mut lane = SenderLane::new(&sock, core, &dsts);
    let mut msg = [0u8; 20];
    let len = plan.message_len.clamp(8, msg.len());
    let mut limiter = plan.qjump;
    let mut limited = 0u64;
    let rep = lane
        .run(stop, plan.until_ns, plan.mode(), &mut |c, slot| {
            if let Some(l) = limiter.as_mut() {
                if !l.admit(slot) {
                    limited += 1;
                    return;
                }
            }
            msg[..8].copy_from_slice(&slot.to_be_bytes());
            // A one-chunk frame per period: the queue never fills.
            let _ = c.enqueue(0, &msg[..len]);
        })
        .map_err(|e| plan.thread_err("sender", host, e))?;
    Ok((rep, limited))
}
