//! Cross traffic (bulk UDP/TCP between emulated hosts) and CPU load.
//!
//! Generators are threads of the calling process. Their sockets are created
//! inside the source/destination namespaces (the creating thread enters and
//! leaves again); the threads then only do I/O on them. An unpaced UDP
//! sender blocks when its socket send buffer is full of packets still queued
//! in the host NIC's qdisc, so the shaper pushes it back to the link rate.

use crate::error::TestbedError;
use crate::netns::in_netns;
use crate::probe::is_timeout;
use crate::state::{self, GeneratorRecord, HostInfo};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often blocked generator threads look at their stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Transport of a cross-traffic flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// UDP datagrams (`payload_bytes` each); the receiver drains and counts.
    Udp,
    /// One TCP connection; the sender writes `payload_bytes` per call.
    Tcp,
}

/// A cross-traffic flow to start with `Testbed::start_cross_traffic`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossTraffic {
    /// Source host index.
    pub from: usize,
    /// Destination host index.
    pub to: usize,
    /// UDP or TCP.
    pub proto: Proto,
    /// Offered rate in bits/s of payload; `None` = unpaced (saturate).
    pub rate_bps: Option<u64>,
    /// CPUs to pin the generator threads to; empty = not pinned.
    pub cpus: Vec<usize>,
    /// UDP datagram payload (default 1472: full 1500-byte frames) or TCP
    /// write size (default 65536).
    pub payload_bytes: usize,
    /// IP TOS byte (default 0: best effort).
    pub tos: u8,
}

impl CrossTraffic {
    /// Unpaced best-effort UDP from host `from` to host `to`.
    pub fn udp(from: usize, to: usize) -> Self {
        CrossTraffic {
            from,
            to,
            proto: Proto::Udp,
            rate_bps: None,
            cpus: Vec::new(),
            payload_bytes: 1472,
            tos: 0,
        }
    }

    /// Unpaced best-effort TCP from host `from` to host `to`.
    pub fn tcp(from: usize, to: usize) -> Self {
        CrossTraffic {
            proto: Proto::Tcp,
            payload_bytes: 65536,
            ..CrossTraffic::udp(from, to)
        }
    }

    /// Set the offered rate (bits/s).
    pub fn rate(mut self, bps: u64) -> Self {
        self.rate_bps = Some(bps);
        self
    }

    /// Pin the generator threads to these CPUs.
    pub fn cpus(mut self, cpus: Vec<usize>) -> Self {
        self.cpus = cpus;
        self
    }

    /// A short description (`udp h1->h2 saturate`).
    pub fn describe(&self) -> String {
        let p = match self.proto {
            Proto::Udp => "udp",
            Proto::Tcp => "tcp",
        };
        let r = match self.rate_bps {
            Some(r) => crate::config::format_rate(r),
            None => "saturate".into(),
        };
        format!("{p} h{}->h{} {r}", self.from, self.to)
    }

    fn validate(&self) -> Result<(), TestbedError> {
        if self.from == self.to {
            return Err(TestbedError::Invalid(
                "cross traffic needs two different hosts".into(),
            ));
        }
        if self.rate_bps == Some(0) {
            return Err(TestbedError::Invalid(
                "cross traffic rate must be > 0".into(),
            ));
        }
        let max = match self.proto {
            Proto::Udp => 65_507,
            Proto::Tcp => 1 << 24,
        };
        if self.payload_bytes == 0 || self.payload_bytes > max {
            return Err(TestbedError::Invalid(format!(
                "payload_bytes must be 1..={max}, got {}",
                self.payload_bytes
            )));
        }
        Ok(())
    }
}

/// Counters of a running flow.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficReport {
    /// What ran (`udp h1->h2 saturate`).
    pub description: String,
    /// Time since start.
    pub elapsed: Duration,
    /// Payload bytes handed to the kernel.
    pub bytes_sent: u64,
    /// Datagrams sent (UDP) or write calls (TCP).
    pub packets_sent: u64,
    /// Payload bytes received by the destination.
    pub bytes_received: u64,
    /// Datagrams (UDP) or read calls (TCP) received.
    pub packets_received: u64,
    /// Sends refused by the kernel (e.g. ENOBUFS) and skipped.
    pub send_errors: u64,
    /// `bytes_sent` as bits/s over `elapsed`.
    pub sent_rate_bps: f64,
    /// `bytes_received` as bits/s over `elapsed`: the achieved rate.
    pub received_rate_bps: f64,
    /// The error that stopped a generator thread, if any.
    pub error: Option<String>,
}

#[derive(Default)]
pub(crate) struct TrafficShared {
    pub(crate) stop: AtomicBool,
    pub(crate) running: AtomicUsize,
    bytes_sent: AtomicU64,
    packets_sent: AtomicU64,
    bytes_received: AtomicU64,
    packets_received: AtomicU64,
    send_errors: AtomicU64,
    error: Mutex<Option<String>>,
}

impl TrafficShared {
    fn fail(&self, msg: String) {
        if let Ok(mut e) = self.error.lock() {
            e.get_or_insert(msg);
        }
    }
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Generators started by one testbed, so that its teardown can stop them.
#[derive(Default)]
pub(crate) struct GenRegistry {
    list: Mutex<Vec<Weak<TrafficShared>>>,
}

impl GenRegistry {
    fn add(&self, s: &Arc<TrafficShared>) {
        if let Ok(mut l) = self.list.lock() {
            l.retain(|w| w.strong_count() > 0);
            l.push(Arc::downgrade(s));
        }
    }

    /// Tell every generator to stop and wait (up to `wait`) for its threads.
    pub(crate) fn stop_all(&self, wait: Duration) {
        let live: Vec<Arc<TrafficShared>> = match self.list.lock() {
            Ok(l) => l.iter().filter_map(Weak::upgrade).collect(),
            Err(_) => return,
        };
        for s in &live {
            s.stop.store(true, Ordering::Relaxed);
        }
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline
            && live.iter().any(|s| s.running.load(Ordering::Acquire) > 0)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Number of generators with running threads.
    pub(crate) fn running(&self) -> usize {
        match self.list.lock() {
            Ok(l) => l
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|s| s.running.load(Ordering::Acquire) > 0)
                .count(),
            Err(_) => 0,
        }
    }
}

/// A running flow; stops (and joins its threads) on `stop()` or drop.
pub struct TrafficHandle {
    shared: Arc<TrafficShared>,
    threads: Vec<JoinHandle<()>>,
    started: Instant,
    description: String,
    record: Option<(String, u64)>,
}

impl std::fmt::Debug for TrafficHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrafficHandle")
            .field("description", &self.description)
            .finish()
    }
}

impl TrafficHandle {
    /// Counters so far, without stopping.
    pub fn report(&self) -> TrafficReport {
        let s = &self.shared;
        let elapsed = self.started.elapsed();
        let secs = elapsed.as_secs_f64().max(1e-9);
        let bytes_sent = s.bytes_sent.load(Ordering::Relaxed);
        let bytes_received = s.bytes_received.load(Ordering::Relaxed);
        TrafficReport {
            description: self.description.clone(),
            elapsed,
            bytes_sent,
            packets_sent: s.packets_sent.load(Ordering::Relaxed),
            bytes_received,
            packets_received: s.packets_received.load(Ordering::Relaxed),
            send_errors: s.send_errors.load(Ordering::Relaxed),
            sent_rate_bps: bytes_sent as f64 * 8.0 / secs,
            received_rate_bps: bytes_received as f64 * 8.0 / secs,
            error: s.error.lock().ok().and_then(|e| e.clone()),
        }
    }

    /// True while any generator thread runs.
    pub fn is_running(&self) -> bool {
        self.shared.running.load(Ordering::Acquire) > 0
    }

    /// Stop, wait for the threads, and report.
    pub fn stop(mut self) -> TrafficReport {
        self.halt();
        self.report()
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if let Some((prefix, id)) = self.record.take() {
            let _ = state::update_state(&prefix, |s| s.generators.retain(|g| g.id != id));
        }
    }
}

impl Drop for TrafficHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Pin the calling thread to `cpus` (no-op when empty).
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), TestbedError> {
    if cpus.is_empty() {
        return Ok(());
    }
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c)
            .map_err(|_| TestbedError::Invalid(format!("CPU {c} out of range")))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| TestbedError::Invalid(format!("cannot pin to CPUs {cpus:?}: {e}")))
}

/// Paces a sender to a rate, allowing at most `burst` of credit.
struct Pacer {
    rate_bps: u64,
    start: Instant,
    sent_bits: u128,
    burst_bits: u128,
}

impl Pacer {
    fn new(rate_bps: u64) -> Self {
        Pacer {
            rate_bps,
            start: Instant::now(),
            sent_bits: 0,
            // 2 ms of credit.
            burst_bits: (rate_bps as u128 / 500).max(65536 * 8),
        }
    }

    /// Wait until `bits` more may be sent; false if told to stop meanwhile.
    fn wait(&mut self, bits: u128, stop: &AtomicBool) -> bool {
        loop {
            let allowed = self.start.elapsed().as_nanos() * self.rate_bps as u128 / 1_000_000_000;
            if allowed > self.sent_bits + self.burst_bits {
                self.sent_bits = allowed - self.burst_bits;
            }
            if self.sent_bits + bits <= allowed {
                self.sent_bits += bits;
                return true;
            }
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            let wait_ns = (self.sent_bits + bits - allowed) * 1_000_000_000 / self.rate_bps as u128;
            std::thread::sleep(Duration::from_nanos(wait_ns.min(POLL.as_nanos()) as u64));
        }
    }
}

fn io_err(what: &str, host: &HostInfo, e: std::io::Error) -> TestbedError {
    TestbedError::io(format!("{what} in {}", host.netns), e)
}

/// Start `spec` between `src` and `dst`. `registry` lets the testbed stop
/// it; `record` (prefix, standalone) records it in that testbed's state
/// file.
pub(crate) fn start(
    src: &HostInfo,
    dst: &HostInfo,
    spec: &CrossTraffic,
    registry: &GenRegistry,
    record: Option<(&str, bool)>,
) -> Result<TrafficHandle, TestbedError> {
    spec.validate()?;
    let shared = Arc::new(TrafficShared::default());
    let mut workers: Vec<Box<dyn FnOnce(Arc<TrafficShared>) + Send>> = Vec::new();
    match spec.proto {
        Proto::Udp => {
            let rx = in_netns(&dst.netns, || {
                UdpSocket::bind(SocketAddrV4::new(dst.addr, 0))
            })?
            .map_err(|e| io_err("bind UDP sink", dst, e))?;
            rx.set_read_timeout(Some(POLL))
                .map_err(|e| io_err("SO_RCVTIMEO", dst, e))?;
            force_rcvbuf(&rx, 8 << 20);
            let port = rx
                .local_addr()
                .map_err(|e| io_err("local_addr", dst, e))?
                .port();
            let tx = in_netns(&src.netns, || {
                UdpSocket::bind(SocketAddrV4::new(src.addr, 0))
            })?
            .map_err(|e| io_err("bind UDP sender", src, e))?;
            socket2::SockRef::from(&tx)
                .set_tos(spec.tos as u32)
                .map_err(|e| io_err("IP_TOS", src, e))?;
            tx.set_write_timeout(Some(POLL))
                .map_err(|e| io_err("SO_SNDTIMEO", src, e))?;
            tx.connect(SocketAddrV4::new(dst.addr, port))
                .map_err(|e| io_err("connect UDP", src, e))?;
            let len = spec.payload_bytes;
            let rate = spec.rate_bps;
            workers.push(Box::new(move |s| udp_send(tx, len, rate, &s)));
            workers.push(Box::new(move |s| udp_recv(rx, &s)));
        }
        Proto::Tcp => {
            let listener = in_netns(&dst.netns, || {
                TcpListener::bind(SocketAddrV4::new(dst.addr, 0))
            })?
            .map_err(|e| io_err("bind TCP listener", dst, e))?;
            let addr = listener
                .local_addr()
                .map_err(|e| io_err("local_addr", dst, e))?;
            let stream = in_netns(&src.netns, || {
                TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            })?
            .map_err(|e| io_err("connect TCP", src, e))?;
            socket2::SockRef::from(&stream)
                .set_tos(spec.tos as u32)
                .map_err(|e| io_err("IP_TOS", src, e))?;
            stream
                .set_write_timeout(Some(POLL))
                .map_err(|e| io_err("SO_SNDTIMEO", src, e))?;
            let local = stream
                .local_addr()
                .map_err(|e| io_err("local_addr", src, e))?;
            let len = spec.payload_bytes;
            let rate = spec.rate_bps;
            workers.push(Box::new(move |s| tcp_send(stream, len, rate, &s)));
            workers.push(Box::new(move |s| tcp_recv(listener, local, &s)));
        }
    }
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let mut threads = Vec::new();
    let n = workers.len();
    for (k, w) in workers.into_iter().enumerate() {
        let s = shared.clone();
        let cpus = spec.cpus.clone();
        let ready = ready_tx.clone();
        s.running.fetch_add(1, Ordering::AcqRel);
        let spawned = std::thread::Builder::new()
            .name(format!("xl-traffic-{k}"))
            .spawn(move || {
                struct Running(Arc<TrafficShared>);
                impl Drop for Running {
                    fn drop(&mut self) {
                        self.0.running.fetch_sub(1, Ordering::AcqRel);
                    }
                }
                let _running = Running(s.clone());
                if let Err(e) = pin_current_thread(&cpus) {
                    let _ = ready.send(Err(e.to_string()));
                    return;
                }
                let _ = ready.send(Ok(()));
                w(s);
            });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                shared.running.fetch_sub(1, Ordering::AcqRel);
                shared.stop.store(true, Ordering::Relaxed);
                for t in threads {
                    let _ = t.join();
                }
                return Err(TestbedError::io("spawn traffic thread", e));
            }
        }
    }
    drop(ready_tx);
    let mut failure = None;
    for _ in 0..n {
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some("traffic thread did not start".into()),
        }
    }
    if let Some(e) = failure {
        shared.stop.store(true, Ordering::Relaxed);
        for t in threads {
            let _ = t.join();
        }
        return Err(TestbedError::Invalid(e));
    }
    registry.add(&shared);
    let description = spec.describe();
    let record = record.and_then(|(p, standalone)| {
        let id = next_id();
        let (pid, start_ticks) = state::me();
        let rec = GeneratorRecord {
            id,
            pid,
            start_ticks: start_ticks.unwrap_or(0),
            standalone,
            description: description.clone(),
        };
        match state::update_state(p, |s| s.generators.push(rec)) {
            Ok(true) => Some((p.to_string(), id)),
            _ => None,
        }
    });
    Ok(TrafficHandle {
        shared,
        threads,
        started: Instant::now(),
        description,
        record,
    })
}

/// Raise a socket's receive buffer past `rmem_max` (root only; best
/// effort: the default buffer also works, it just drops more under bursts).
fn force_rcvbuf(s: &UdpSocket, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt with a valid fd and a pointer to a c_int that
    // lives for the call.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// A process-unique id for state-file records.
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    (std::process::id() as u64) << 32 | n
}

fn udp_send(tx: UdpSocket, len: usize, rate: Option<u64>, s: &TrafficShared) {
    let buf = vec![0x5au8; len];
    let mut pacer = rate.map(Pacer::new);
    let bits = (len as u128 + 28) * 8;
    while !s.stopping() {
        if let Some(p) = pacer.as_mut() {
            if !p.wait(bits, &s.stop) {
                break;
            }
        }
        match tx.send(&buf) {
            Ok(n) => {
                s.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
                s.packets_sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOBUFS) | Some(libc::ECONNREFUSED)
                ) =>
            {
                s.send_errors.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                s.fail(format!("UDP send: {e}"));
                break;
            }
        }
    }
}

fn udp_recv(rx: UdpSocket, s: &TrafficShared) {
    let mut buf = vec![0u8; 65536];
    while !s.stopping() {
        match rx.recv(&mut buf) {
            Ok(n) => {
                s.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
                s.packets_received.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => {
                s.fail(format!("UDP receive: {e}"));
                break;
            }
        }
    }
}

fn tcp_send(mut tx: TcpStream, len: usize, rate: Option<u64>, s: &TrafficShared) {
    let buf = vec![0x5au8; len];
    // Paced writes are kept small so the pacing is smooth.
    let chunk = if rate.is_some() {
        len.min(16 * 1024)
    } else {
        len
    };
    let mut pacer = rate.map(Pacer::new);
    while !s.stopping() {
        if let Some(p) = pacer.as_mut() {
            if !p.wait(chunk as u128 * 8, &s.stop) {
                break;
            }
        }
        let mut off = 0;
        while off < chunk && !s.stopping() {
            match tx.write(&buf[off..chunk]) {
                Ok(0) => {
                    s.fail("TCP send: connection closed".into());
                    return;
                }
                Ok(n) => {
                    off += n;
                    s.bytes_sent.fetch_add(n as u64, Ordering::Relaxed);
                    s.packets_sent.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if is_timeout(&e) => {}
                Err(e) => {
                    if !s.stopping() {
                        s.fail(format!("TCP send: {e}"));
                    }
                    return;
                }
            }
        }
    }
    let _ = tx.shutdown(std::net::Shutdown::Both);
}

fn tcp_recv(listener: TcpListener, peer_local: SocketAddr, s: &TrafficShared) {
    if let Err(e) = listener.set_nonblocking(true) {
        s.fail(format!("TCP listener: {e}"));
        return;
    }
    let mut stream = loop {
        if s.stopping() {
            return;
        }
        match listener.accept() {
            Ok((st, from)) if from == peer_local => break st,
            Ok(_) => continue, // not our sender
            Err(e) if is_timeout(&e) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => {
                s.fail(format!("TCP accept: {e}"));
                return;
            }
        }
    };
    if let Err(e) = stream
        .set_nonblocking(false)
        .and_then(|_| stream.set_read_timeout(Some(POLL)))
    {
        s.fail(format!("TCP receiver setup: {e}"));
        return;
    }
    let mut buf = vec![0u8; 256 * 1024];
    while !s.stopping() {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                s.bytes_received.fetch_add(n as u64, Ordering::Relaxed);
                s.packets_received.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => {
                if !s.stopping() {
                    s.fail(format!("TCP receive: {e}"));
                }
                break;
            }
        }
    }
}

/// Report of a CPU load run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuLoadReport {
    /// Threads that ran.
    pub threads: usize,
    /// How long.
    pub elapsed: Duration,
    /// Work units done (each: 4096 read-modify-writes of a 256 KiB buffer).
    pub iterations: u64,
}

/// Spinning threads doing memory work; stop with `stop()` or drop.
pub struct CpuLoadHandle {
    stop: Arc<AtomicBool>,
    iterations: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
    started: Instant,
}

impl std::fmt::Debug for CpuLoadHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuLoadHandle")
            .field("threads", &self.threads.len())
            .finish()
    }
}

impl CpuLoadHandle {
    /// Stop the threads and report.
    pub fn stop(mut self) -> CpuLoadReport {
        let threads = self.threads.len();
        self.halt();
        CpuLoadReport {
            threads,
            elapsed: self.started.elapsed(),
            iterations: self.iterations.load(Ordering::Relaxed),
        }
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for CpuLoadHandle {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Start `threads_per_cpu` spinning threads pinned to each CPU in `cpus`.
pub fn start_cpu_load(
    cpus: &[usize],
    threads_per_cpu: usize,
) -> Result<CpuLoadHandle, TestbedError> {
    if cpus.is_empty() || threads_per_cpu == 0 {
        return Err(TestbedError::Invalid(
            "CPU load needs at least one CPU and one thread per CPU".into(),
        ));
    }
    let mut h = CpuLoadHandle {
        stop: Arc::new(AtomicBool::new(false)),
        iterations: Arc::new(AtomicU64::new(0)),
        threads: Vec::new(),
        started: Instant::now(),
    };
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    for &cpu in cpus {
        for k in 0..threads_per_cpu {
            let stop = h.stop.clone();
            let iters = h.iterations.clone();
            let ready = ready_tx.clone();
            let t = std::thread::Builder::new()
                .name(format!("xl-load-{cpu}-{k}"))
                .spawn(move || {
                    if let Err(e) = pin_current_thread(&[cpu]) {
                        let _ = ready.send(Err(e.to_string()));
                        return;
                    }
                    let _ = ready.send(Ok(()));
                    spin(&stop, &iters);
                })
                .map_err(|e| TestbedError::io("spawn CPU load thread", e))?;
            h.threads.push(t);
        }
    }
    drop(ready_tx);
    for _ in 0..h.threads.len() {
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(TestbedError::Invalid(e)),
            Err(_) => return Err(TestbedError::Thread("CPU load thread did not start".into())),
        }
    }
    h.started = Instant::now();
    Ok(h)
}

fn spin(stop: &AtomicBool, iters: &AtomicU64) {
    let mut buf = vec![0u64; 32 * 1024]; // 256 KiB
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut idx = 0usize;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..4096 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            idx = (idx + (x >> 58) as usize + 1) % buf.len();
            buf[idx] ^= x;
        }
        std::hint::black_box(&mut buf);
        iters.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_checked() {
        assert!(CrossTraffic::udp(1, 1).validate().is_err());
        assert!(CrossTraffic::udp(0, 1).rate(0).validate().is_err());
        let mut big = CrossTraffic::udp(0, 1);
        big.payload_bytes = 70_000;
        assert!(big.validate().is_err());
        assert!(CrossTraffic::tcp(0, 1).rate(5_000_000).validate().is_ok());
        assert_eq!(CrossTraffic::udp(1, 2).describe(), "udp h1->h2 saturate");
        assert_eq!(
            CrossTraffic::tcp(0, 3).rate(200_000_000).describe(),
            "tcp h0->h3 200mbit"
        );
    }

    #[test]
    fn pacer_never_runs_ahead_of_its_rate() {
        // 400 chunks of 10 kbit at 80 Mbit/s (about 50 ms): after each, the
        // bits let through never exceed the rate times the time since the
        // pacer started plus its burst. A busy machine can only delay the
        // pacer, never make it run ahead, so this holds however loaded the
        // machine is; how closely it tracks the rate is not asserted.
        let stop = AtomicBool::new(false);
        let start = Instant::now();
        let mut p = Pacer::new(80_000_000);
        for n in 1..=400u128 {
            assert!(p.wait(10_000, &stop));
            let allowed = start.elapsed().as_nanos() * 80 / 1000 + p.burst_bits;
            assert!(n * 10_000 <= allowed, "ran ahead at chunk {n}");
        }
        // Told to stop, it gives up instead of waiting.
        stop.store(true, Ordering::Relaxed);
        assert!(!p.wait(1_000_000_000, &stop));
    }

    #[test]
    fn cpu_load_runs_and_stops() {
        let allowed = nix::sched::sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cpu = (0..CpuSet::count())
            .find(|&c| allowed.is_set(c).unwrap_or(false))
            .unwrap();
        let h = start_cpu_load(&[cpu], 1).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let r = h.stop();
        assert_eq!(r.threads, 1);
        assert!(r.iterations > 0);
        assert!(start_cpu_load(&[], 1).is_err());
        assert!(start_cpu_load(&[100_000], 1).is_err());
    }
}
