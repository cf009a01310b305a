//! The parts of a `bench pipe` point: the hop daemon (`xlane pipe
//! switchd`) and the recovery coordinator in the switch namespace, and the
//! processes, each a thread in its host's namespace driving a
//! [`UdpEndpoint`].

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use xlane_pipe::lane::{LanePortConfig, LaneStats, LaneTunnel};
use xlane_pipe::udp::{now_ns, DriverStats, UdpEndpoint};
use xlane_pipe::{CoordOut, CoordStats, Coordinator, Ctl, ReceiverConfig, SendEvent, SenderConfig};

use crate::kv_bench::Rng;

/// The hop's address on the switch's bridge (the testbed's hosts are
/// 198.18.0.1…).
pub const SWITCH_ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);
/// The hop's port.
pub const SWITCH_PORT: u16 = 7400;
/// Process `p` listens on this port plus `p`.
pub const PROC_PORT: u16 = 7500;
/// Most processes of a point (a scattering's receivers are a 64-bit mask).
pub const MAX_PROCS: usize = 64;

/// The bridge's own MAC, set so that it never changes when a port goes
/// down and up (a bridge takes its lowest port's otherwise).
const SWITCH_MAC: &str = "02:78:6c:00:00:fe";

/// Gives the switch's bridge [`SWITCH_ADDR`] and a fixed MAC, with
/// permanent neighbour entries both ways: no ARP on the measured path, and
/// none to redo after a cut link comes back.
pub fn give_switch_an_address(tb: &xlane_testbed::Testbed) -> Result<(), String> {
    let sw = tb.switch_netns();
    let br = tb.bridge();
    let ip = |args: &[&str]| {
        xlane_testbed::exec::run("ip", args)
            .map(|_| ())
            .map_err(|e| format!("switch address: {e}"))
    };
    ip(&["-n", sw, "link", "set", br, "address", SWITCH_MAC])?;
    let cidr = format!("{SWITCH_ADDR}/24");
    ip(&["-n", sw, "addr", "add", &cidr, "dev", br])?;
    let me = SWITCH_ADDR.to_string();
    for h in tb.hosts() {
        let a = h.addr.to_string();
        ip(&[
            "-n",
            sw,
            "neigh",
            "replace",
            &a,
            "lladdr",
            &h.mac,
            "dev",
            br,
            "nud",
            "permanent",
        ])?;
        ip(&[
            "-n",
            &h.netns,
            "neigh",
            "replace",
            &me,
            "lladdr",
            SWITCH_MAC,
            "dev",
            &h.iface,
            "nud",
            "permanent",
        ])?;
    }
    Ok(())
}

/// `xlane pipe switchd` in the switch namespace: its JSON lines come back
/// stamped with the monotonic time they were read.
pub struct Switchd {
    child: Child,
    events: Receiver<(u64, serde_json::Value)>,
}

/// A switchd's beacons on lane tunnels.
#[derive(Clone, Debug)]
pub struct SwitchdLane {
    /// Its lane address.
    pub bind: SocketAddrV4,
    /// The processes' beacon tunnels to it.
    pub inputs: Vec<LaneTunnel>,
    /// Its own beacon tunnel, and where the frames go.
    pub out: Option<(LaneTunnel, SocketAddrV4)>,
    /// DSCP of the tunnels' sub-lane.
    pub dscp: u8,
    /// W of its beacon cap, µs.
    pub window_us: u64,
}

/// How a switchd is started.
pub struct SwitchdSpec<'a> {
    /// The xlane binary.
    pub exe: &'a Path,
    /// Its namespace (the switch's, or the hop host's).
    pub netns: &'a str,
    /// Its address.
    pub bind: SocketAddrV4,
    /// Beacons on lane tunnels.
    pub lane: Option<SwitchdLane>,
    /// Input links and routes: every process's address.
    pub procs: &'a [SocketAddrV4],
    /// Beacon interval, µs.
    pub beacon_us: u64,
    /// Silent intervals before an input is reported.
    pub dead_after: u32,
    /// Hold silent inputs until this coordinator removes them (reliable).
    pub coordinator: Option<SocketAddrV4>,
    /// Run at this `SCHED_FIFO` priority (`chrt`), if any (one above the
    /// processes: a hop starved by its own endpoints reports them silent).
    pub fifo: Option<i32>,
    /// DSCP of what it sends.
    pub dscp: u8,
}

/// The calling thread at a `SCHED_FIFO` priority until dropped (then back
/// to the normal class).
pub struct RealTime(bool);

impl RealTime {
    /// Raises the calling thread to `prio`, if given (best effort).
    pub fn raise(prio: Option<i32>) -> RealTime {
        RealTime(prio.is_some_and(|p| {
            xlane_host::runtime::place_current_thread(xlane_host::runtime::Placement {
                core: None,
                fifo: Some(p),
            })
            .is_ok()
        }))
    }
}

impl Drop for RealTime {
    fn drop(&mut self) {
        if self.0 {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: valid param pointer; 0 = the calling thread.
            unsafe {
                libc::sched_setscheduler(0, libc::SCHED_OTHER, &param);
            }
        }
    }
}

impl Switchd {
    /// Starts it and waits (at most 10 s) for its `ready` line.
    pub fn start(s: &SwitchdSpec) -> Result<Switchd, String> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", s.netns]);
        if let Some(p) = s.fifo {
            cmd.args(["chrt", "-f", &p.to_string()]);
        }
        cmd.arg(s.exe).args(["pipe", "switchd", "--bind"]);
        cmd.arg(s.bind.to_string());
        if let Some(l) = &s.lane {
            cmd.args(["--lane-bind", &l.bind.to_string()]);
            for t in &l.inputs {
                cmd.arg("--lane-in")
                    .arg(format!("{}:{}", t.tunnel, t.period_ns / 1_000));
            }
            if let Some((t, to)) = l.out {
                cmd.arg("--lane-out")
                    .arg(format!("{}:{}@{to}", t.tunnel, t.period_ns / 1_000));
            }
            cmd.args(["--lane-dscp", &l.dscp.to_string()]);
            cmd.args(["--lane-window-us", &l.window_us.to_string()]);
        }
        for (p, a) in s.procs.iter().enumerate() {
            cmd.arg("--input").arg(a.to_string());
            cmd.arg("--route").arg(format!("{p}={a}"));
        }
        cmd.args(["--beacon-us", &s.beacon_us.to_string()]);
        cmd.args(["--dead-after", &s.dead_after.to_string()]);
        if let Some(c) = s.coordinator {
            cmd.args(["--hold-silent", "--coordinator", &c.to_string()]);
        }
        cmd.args(["--dscp", &s.dscp.to_string()]);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start switchd ({}): {e}", s.exe.display()))?;
        let Some(stdout) = child.stdout.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err("switchd: no pipes".into());
        };
        let (tx, events) = mpsc::channel();
        let prio = s.fifo;
        std::thread::spawn(move || {
            // At the hop's priority: its reports must not wait behind the
            // processes.
            let _rt = RealTime::raise(prio);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    if tx.send((now_ns(), v)).is_err() {
                        break;
                    }
                }
            }
        });
        let mut d = Switchd { child, events };
        match d.next_event(Duration::from_secs(10)) {
            Some((_, v)) if v["event"] == "ready" => Ok(d),
            other => Err(format!(
                "switchd did not start: {}",
                other.map_or("no output".into(), |(_, v)| v.to_string())
            )),
        }
    }

    /// The next line, waiting at most `wait`.
    pub fn next_event(&mut self, wait: Duration) -> Option<(u64, serde_json::Value)> {
        self.events.recv_timeout(wait).ok()
    }

    /// CPU time it used so far, ns (`/proc/PID/stat`).
    pub fn cpu_ns(&self) -> u64 {
        process_cpu_ns(self.child.id())
    }

    /// SIGTERM, then its final status line (`stopped`).
    pub fn stop(mut self) -> Option<serde_json::Value> {
        // SAFETY: kill on our own child's PID, not yet waited for.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut last = None;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.events.recv_timeout(left) {
                Ok((_, v)) if v["event"] == "stopped" => {
                    last = Some(v);
                    break;
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        last
    }
}

impl Drop for Switchd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// utime + stime of process `pid`, ns.
fn process_cpu_ns(pid: u32) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the command name (which may hold spaces) in parentheses.
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else {
        return 0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ticks * (1_000_000_000 / hz)
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// A process this far behind its schedule skips what it missed.
pub const MAX_LAG_NS: u64 = 5_000_000;

/// A process runs and sends.
pub const RUN: u8 = 0;
/// A process stops sending but still receives (the drain).
pub const QUIET: u8 = 1;
/// A process stops: its socket closes, it says nothing more (killed, or
/// fenced by the coordinator).
pub const DEAD: u8 = 2;

/// A process of a point.
pub struct ProcSpec {
    /// Its id.
    pub id: u32,
    /// Its host's namespace.
    pub netns: String,
    /// Every process's address (index = id).
    pub addrs: Vec<SocketAddrV4>,
    /// Scatterings per second (Poisson; 0: it only receives).
    pub rate: f64,
    /// Receivers per scattering.
    pub fanout: usize,
    /// Reliable or best effort.
    pub reliable: bool,
    /// Beacon interval, ns.
    pub beacon_ns: u64,
    /// Payload bytes per message.
    pub payload: usize,
    /// Seed of its picks and gaps.
    pub seed: u64,
    /// First send, monotonic ns; `u64::MAX` until the bench sets it (the
    /// process binds and beacons before, so that its hop hears it from
    /// its own start).
    pub start_ns: Arc<std::sync::atomic::AtomicU64>,
    /// Deliveries of every process, counted together.
    pub delivered: Arc<std::sync::atomic::AtomicU64>,
    /// Processes bound and beaconing, counted together (each adds one
    /// before its first turn, or when it gave up with an error).
    pub ready: Arc<std::sync::atomic::AtomicUsize>,
    /// `SCHED_FIFO` priority, if any.
    pub fifo: Option<i32>,
    /// The core it runs on, if pinned.
    pub core: Option<usize>,
    /// DSCP of what it sends.
    pub dscp: u8,
    /// The recovery coordinator it obeys (reliable mode).
    pub coordinator: Option<SocketAddrV4>,
    /// Its hop.
    pub hop: SocketAddrV4,
    /// Beacons on lane tunnels.
    pub lane: Option<LanePortConfig>,
}

/// One delivery as a receiver saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rec {
    /// Sender.
    pub src: u32,
    /// Timestamp (≈ when it was sent: one clock for every process here).
    pub ts: u64,
    /// When it arrived.
    pub arrived: u64,
    /// When it was delivered.
    pub delivered: u64,
}

/// What a process did.
#[derive(Debug, Default)]
pub struct ProcOut {
    /// Its id.
    pub id: u32,
    /// Its deliveries, in order.
    pub recs: Vec<Rec>,
    /// Its scatterings: timestamp and receivers (bit per process).
    pub sent: Vec<(u64, u64)>,
    /// Timestamps of its scatterings of which some message failed
    /// (`send_fail`; aborted, in reliable mode).
    pub failed: Vec<u64>,
    /// Scatterings refused by the sender core (full, or to failed
    /// processes only).
    pub refused: u64,
    /// Latest a send left after its scheduled time, ns: a process that
    /// could not keep up shows here.
    pub max_send_lag_ns: u64,
    /// Scheduled scatterings skipped because the process fell more than
    /// [`MAX_LAG_NS`] behind (the machine held it back): it does not
    /// catch up in a burst, which at a real-time priority would starve
    /// the rest.
    pub skipped: u64,
    /// Driver counters.
    pub driver: DriverStats,
    /// Messages refused at the receiver as late (best effort).
    pub late: u64,
    /// Reliable retransmissions.
    pub retransmits: u64,
    /// Its thread's CPU time, ns.
    pub cpu_ns: u64,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
    /// The coordinator declared it failed (a false suspicion, or its link
    /// cut): it stopped.
    pub excluded: bool,
    /// Its lane port's counters (beacons on the lane).
    pub lane: Option<LaneStats>,
    /// It got as far as its loop (bound, set up, first beacon sent).
    pub started: bool,
}

/// A running process.
pub struct Proc {
    /// Run, quiet or dead.
    pub state: Arc<AtomicU8>,
    thread: std::thread::JoinHandle<ProcOut>,
}

impl Proc {
    /// Starts the process's thread.
    pub fn start(spec: ProcSpec) -> Proc {
        let state = Arc::new(AtomicU8::new(RUN));
        let st = state.clone();
        let thread = std::thread::spawn(move || {
            let id = spec.id;
            let r = xlane_testbed::in_netns(&spec.netns, || run_proc(&spec, &st));
            match r {
                Ok(out) => out,
                Err(e) => ProcOut {
                    id,
                    error: Some(format!("enter {}: {e}", spec.netns)),
                    ..ProcOut::default()
                },
            }
        });
        Proc { state, thread }
    }

    /// Stops it and returns what it did.
    pub fn join(self) -> ProcOut {
        self.state.store(DEAD, Ordering::SeqCst);
        self.thread.join().unwrap_or_else(|_| ProcOut {
            error: Some("the process thread panicked".into()),
            ..ProcOut::default()
        })
    }
}

fn run_proc(spec: &ProcSpec, state: &AtomicU8) -> ProcOut {
    let out = set_up_and_run(spec, state);
    // A process that stopped before its loop counts as ready too: the
    // point sees its error instead of waiting for it.
    if out.error.is_some() && !out.started {
        spec.ready.fetch_add(1, Ordering::SeqCst);
    }
    out
}

fn set_up_and_run(spec: &ProcSpec, state: &AtomicU8) -> ProcOut {
    let mut out = ProcOut {
        id: spec.id,
        ..ProcOut::default()
    };
    if spec.fifo.is_some() || spec.core.is_some() {
        // Best effort: without it the process runs at normal priority,
        // anywhere.
        let _ = xlane_host::runtime::place_current_thread(xlane_host::runtime::Placement {
            core: spec.core,
            fifo: spec.fifo,
        });
    }
    let peers: HashMap<u32, SocketAddrV4> = spec
        .addrs
        .iter()
        .enumerate()
        .map(|(i, a)| (i as u32, *a))
        .collect();
    let sender = SenderConfig {
        ack_timeout_ns: 100_000_000,
        rto_ns: 5_000_000,
        max_outstanding: 1 << 16,
    };
    let mut ep = match UdpEndpoint::bind(
        spec.addrs[spec.id as usize],
        spec.id,
        spec.hop,
        peers,
        spec.beacon_ns,
        (sender, ReceiverConfig::default()),
    ) {
        Ok(ep) => ep,
        Err(e) => {
            out.error = Some(format!("bind {}: {e}", spec.addrs[spec.id as usize]));
            return out;
        }
    };
    if let Err(e) = ep.set_tos(spec.dscp << 2) {
        out.error = Some(format!("DSCP {}: {e}", spec.dscp));
        return out;
    }
    ep.set_coordinators(spec.coordinator.into_iter().collect());
    if let Some(l) = &spec.lane {
        if let Err(e) = ep.set_lane(l) {
            out.error = Some(format!("lane port {}: {e}", l.bind));
            return out;
        }
    }
    let cpu0 = thread_cpu_ns();
    let n = spec.addrs.len();
    let mut failed = vec![false; n];
    let mut rng = Rng::new(spec.seed ^ (u64::from(spec.id) << 32));
    let payload = vec![0x5a_u8; spec.payload];
    let mut next = u64::MAX;
    let gap_ns = 1e9 / spec.rate.max(1e-3);
    let mut dsts: Vec<u32> = Vec::with_capacity(spec.fanout);
    // The first turn sends the first beacon.
    if let Err(e) = ep.wait(Duration::ZERO) {
        out.error = Some(format!("socket: {e}"));
        return out;
    }
    out.started = true;
    spec.ready.fetch_add(1, Ordering::SeqCst);
    loop {
        let st = state.load(Ordering::Relaxed);
        if st == DEAD {
            break;
        }
        // proc_fail: the endpoint has discarded and aborted already.
        while let Some((proc, _)) = ep.poll_proc_fail() {
            if let Some(f) = failed.get_mut(proc as usize) {
                *f = true;
            }
            out.excluded |= proc == spec.id;
        }
        if out.excluded {
            break;
        }
        if next == u64::MAX {
            next = spec.start_ns.load(Ordering::Relaxed);
        }
        let now = now_ns();
        let sends = st == RUN && spec.rate > 0.0;
        if sends && now >= next {
            // now ≥ next: the condition above.
            out.max_send_lag_ns = out.max_send_lag_ns.max(now - next);
            if now - next > MAX_LAG_NS {
                out.skipped += ((now - next) as f64 / gap_ns) as u64;
                next = now;
            }
            pick(&mut rng, spec.id, &failed, spec.fanout, &mut dsts);
            if !dsts.is_empty() {
                let msgs: Vec<(u32, &[u8])> = dsts.iter().map(|&d| (d, &payload[..])).collect();
                match ep.scatter(&msgs, spec.reliable) {
                    Ok(ts) => {
                        let mask = dsts.iter().fold(0u64, |m, &d| m | (1 << d));
                        out.sent.push((ts, mask));
                    }
                    Err(_) => out.refused += 1,
                }
            }
            next += (-rng.unit().ln() * gap_ns) as u64;
        }
        let wake = if sends { next } else { u64::MAX };
        let max = Duration::from_nanos(wake.saturating_sub(now_ns()).min(1_000_000));
        if let Err(e) = ep.wait(max) {
            out.error = Some(format!("socket: {e}"));
            break;
        }
        let before = out.recs.len();
        while let Some(d) = ep.poll_deliver() {
            out.recs.push(Rec {
                src: d.src,
                ts: d.ts,
                arrived: d.arrived,
                delivered: now_ns(),
            });
        }
        spec.delivered
            .fetch_add((out.recs.len() - before) as u64, Ordering::Relaxed);
        while let Some(SendEvent::Failed { ts, .. }) = ep.poll_event() {
            if out.failed.last() != Some(&ts) {
                out.failed.push(ts);
            }
        }
    }
    out.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    out.driver = ep.stats();
    out.late = ep.receiver().stats().late;
    out.lane = ep.lane_stats();
    out.retransmits = ep.sender().stats().retransmits;
    out
}

/// Up to `fanout` receivers other than `me` and not failed, at random.
fn pick(rng: &mut Rng, me: u32, failed: &[bool], fanout: usize, out: &mut Vec<u32>) {
    out.clear();
    let live: Vec<u32> = (0..failed.len() as u32)
        .filter(|&p| p != me && !failed[p as usize])
        .collect();
    let k = fanout.min(live.len());
    // A partial Fisher–Yates shuffle over the live processes.
    let mut live = live;
    for i in 0..k {
        let j = i + (rng.next_u64() % (live.len() - i) as u64) as usize;
        live.swap(i, j);
        out.push(live[i]);
    }
}

/// The bench's recovery coordinator: `xlane_pipe`'s [`Coordinator`] on a
/// socket in the switch namespace (a cut host link cannot isolate it),
/// one replica deciding each failure timestamp itself. The replicated
/// deployment (`xlane pipe coordinator`) adds a store round trip to each
/// recovery; this one measures the protocol.
pub struct BenchCoordinator {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Result<(CoordStats, Vec<u32>), String>>,
    /// Each recovery done: the process and when (monotonic ns).
    pub recovered: Receiver<(u32, u64)>,
}

/// The coordinator's address.
pub const COORD_ADDR: SocketAddrV4 = SocketAddrV4::new(SWITCH_ADDR, SWITCH_PORT + 1);

impl BenchCoordinator {
    /// Starts it for the processes at `procs` (index = id).
    pub fn start(netns: &str, procs: &[SocketAddrV4], fifo: Option<i32>) -> BenchCoordinator {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, recovered) = mpsc::channel();
        let ids: Vec<(u32, SocketAddrV4)> = procs
            .iter()
            .enumerate()
            .map(|(i, a)| (i as u32, *a))
            .collect();
        let (st, ns) = (stop.clone(), netns.to_string());
        let thread = std::thread::spawn(move || {
            xlane_testbed::in_netns(&ns, || coordinate(&ids, &st, &tx, fifo))
                .map_err(|e| format!("enter {ns}: {e}"))?
        });
        BenchCoordinator {
            stop,
            thread,
            recovered,
        }
    }

    /// Stops it: its counters and the processes whose recovery it had
    /// not finished, or why it failed.
    pub fn stop(self) -> Result<(CoordStats, Vec<u32>), String> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread
            .join()
            .unwrap_or_else(|_| Err("the coordinator thread panicked".into()))
    }
}

fn coordinate(
    procs: &[(u32, SocketAddrV4)],
    stop: &std::sync::atomic::AtomicBool,
    recovered: &Sender<(u32, u64)>,
    fifo: Option<i32>,
) -> Result<(CoordStats, Vec<u32>), String> {
    let _rt = RealTime::raise(fifo);
    let sock =
        std::net::UdpSocket::bind(COORD_ADDR).map_err(|e| format!("bind {COORD_ADDR}: {e}"))?;
    sock.set_read_timeout(Some(Duration::from_millis(1)))
        .map_err(|e| e.to_string())?;
    let mut core = Coordinator::new(procs, 5_000_000);
    let mut buf = [0u8; 64];
    let mut out = Vec::with_capacity(64);
    while !stop.load(Ordering::Relaxed) {
        if let Ok((n, std::net::SocketAddr::V4(from))) = sock.recv_from(&mut buf) {
            if let Ok(m) = Ctl::parse(&buf[..n]) {
                core.on_ctl(from, m, now_ns());
            }
        }
        core.handle_timeout(now_ns());
        while let Some(o) = core.poll() {
            match o {
                CoordOut::Decide { proc, t_fail } => core.on_decided(proc, t_fail, now_ns()),
                CoordOut::Send { to, msg } => {
                    out.clear();
                    msg.emit(&mut out);
                    let _ = sock.send_to(&out, to);
                }
                CoordOut::Recovered { proc, .. } => {
                    let _ = recovered.send((proc, now_ns()));
                }
            }
        }
    }
    Ok((core.stats(), core.recovering().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_are_distinct_live_others() {
        let mut rng = Rng::new(3);
        let failed = [false, true, false, false, false];
        let mut out = Vec::new();
        for _ in 0..200 {
            pick(&mut rng, 0, &failed, 3, &mut out);
            assert_eq!(out.len(), 3);
            let mut s = out.clone();
            s.sort_unstable();
            s.dedup();
            assert_eq!(s.len(), 3);
            assert!(out.iter().all(|&p| p != 0 && p != 1));
        }
        pick(&mut rng, 0, &[false, true], 3, &mut out);
        assert!(out.is_empty());
    }
}
