//! The synthetic server (ground truth for the tool) and a plain echo server.
//!
//! Synthetic mode: every request joins one shared FIFO queue; `c` worker
//! threads take requests in arrival order and busy-spin for the request's
//! service time (drawn at arrival from a seeded generator, so a given seed
//! and arrival order give the same service times), then reply with a 32-byte
//! header carrying the server sojourn: from the kernel's receive stamp of the
//! request (user time after `recvmsg` where there is none, and always for
//! TCP) to just before the reply is sent. With Poisson arrivals and
//! exponential service this is an M/M/c FCFS queue.
//!
//! Echo mode: every UDP datagram is sent back unchanged to its sender from
//! the receiving thread; a TCP connection gets its byte stream back.
//!
//! R2P2 ([`crate::Transport::R2p2`]): each worker has its own port and FIFO
//! and waits out service times asleep; see [`crate::r2p2`].
//!
//! Idle workers sleep on a condition variable (they do not spin), so a
//! request that finds a worker idle pays one thread wake-up; a
//! zero-service-time run measures that cost together with the network stack.

use crate::dist::ServiceDist;
use crate::proto::{self, ProtoError, SynKind, MAX_MESSAGE_LEN, SYN_HEADER_LEN};
use crate::rng::Rng;
pub use crate::server_stats::ServerStats;
use crate::server_stats::{bump, Counters};
use crate::Transport;
use serde::Serialize;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;
use xlane_host::socket::{monotonic_ns, realtime_ns, LaneSocket, SocketConfig, SocketError};

/// Generator stream of the service times ([`Rng::stream`]); the client's
/// schedules use other streams, so one seed for both is fine.
pub const SERVER_STREAM: u64 = 1;

/// How often blocked server threads look at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// What the server does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServeMode {
    /// Send every message back unchanged.
    Echo,
    /// The synthetic protocol with this service-time distribution.
    Synthetic(ServiceDist),
}

/// Server settings.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address to listen on.
    pub bind: SocketAddrV4,
    /// UDP or TCP.
    pub transport: Transport,
    /// Echo or synthetic.
    pub mode: ServeMode,
    /// Worker threads `c` (synthetic mode).
    pub workers: usize,
    /// Seed of the service-time generator.
    pub seed: u64,
    /// Most requests waiting in the queue; more are dropped (and counted).
    pub queue_cap: usize,
    /// Run the workers under `SCHED_FIFO` at this priority and the receiving
    /// threads one above (needs root). Busy-spinning real-time workers keep
    /// other load from stretching service times; the kernel's RT throttling
    /// still leaves 5 % of each CPU to others, but an overloaded server
    /// with real-time workers will make the machine sluggish.
    pub rt_priority: Option<i32>,
    /// R2P2: where each worker sends FEEDBACK after a reply (the router).
    pub feedback_to: Option<SocketAddrV4>,
}

impl ServeConfig {
    /// A synthetic UDP server on `bind` with `workers` workers.
    pub fn synthetic(bind: SocketAddrV4, service: ServiceDist, workers: usize) -> Self {
        ServeConfig {
            bind,
            transport: Transport::Udp,
            mode: ServeMode::Synthetic(service),
            workers,
            seed: 1,
            queue_cap: 1 << 16,
            rt_priority: None,
            feedback_to: None,
        }
    }

    /// A UDP echo server on `bind`.
    pub fn echo(bind: SocketAddrV4) -> Self {
        ServeConfig {
            bind,
            transport: Transport::Udp,
            mode: ServeMode::Echo,
            workers: 1,
            seed: 1,
            queue_cap: 1 << 16,
            rt_priority: None,
            feedback_to: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Opening the UDP socket failed.
    #[error("opening the UDP socket: {0}")]
    Socket(#[from] SocketError),
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// Which step.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// Bad settings.
    #[error("{0}")]
    Config(String),
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> ServeError {
    move |source| ServeError::Io { what, source }
}

/// Apply the configured priority (plus `above`) to the calling thread.
fn apply_rt(prio: Option<i32>, above: i32, counters: &Counters) {
    xlane_host::runtime::tighten_timer_slack();
    if let Some(p) = prio {
        if crate::sched::set_realtime(p + above).is_err() {
            bump(&counters.rt_denied);
        }
    }
}

enum ReplyTo {
    Udp(SocketAddrV4),
    Tcp(Arc<Mutex<TcpStream>>),
}

struct Job {
    id: u64,
    reply: ReplyTo,
    rx_rt_ns: u64,
    service_ns: u64,
}

struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    cap: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Queue {
    fn push(&self, job: Job, counters: &Counters) {
        let mut q = lock(&self.jobs);
        if q.len() >= self.cap {
            bump(&counters.dropped);
            return;
        }
        q.push_back(job);
        drop(q);
        self.ready.notify_one();
    }

    fn pop(&self, stop: &AtomicBool) -> Option<Job> {
        let mut q = lock(&self.jobs);
        loop {
            if let Some(j) = q.pop_front() {
                return Some(j);
            }
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            q = self
                .ready
                .wait_timeout(q, STOP_POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// A running server; stops (and joins its threads) on [`Server::stop`] or drop.
pub struct Server {
    addrs: Vec<SocketAddrV4>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    threads: Vec<JoinHandle<()>>,
    conn_threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// Busy-wait until `CLOCK_MONOTONIC` reaches `deadline_ns` (wall-clock
/// spinning: a preemption in the middle does not lengthen the service,
/// unless it outlasts the deadline).
pub fn spin_until(deadline_ns: u64) {
    while monotonic_ns() < deadline_ns {
        std::hint::spin_loop();
    }
}

impl Server {
    /// Bind and start the server threads.
    pub fn start(cfg: &ServeConfig) -> Result<Server, ServeError> {
        if cfg.workers == 0 {
            return Err(ServeError::Config("--workers must be at least 1".into()));
        }
        if cfg.workers > 256 {
            return Err(ServeError::Config("--workers must be at most 256".into()));
        }
        if let Some(p) = cfg.rt_priority {
            if !(1..=97).contains(&p) {
                return Err(ServeError::Config(format!(
                    "--rt-priority must be in 1..=97, got {p}"
                )));
            }
        }
        let rt = cfg.rt_priority;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let conn_threads = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Queue {
            jobs: Mutex::new(VecDeque::with_capacity(cfg.queue_cap.min(1 << 20))),
            ready: Condvar::new(),
            cap: cfg.queue_cap.max(1),
        });
        let mut threads = Vec::new();
        let mut addrs = Vec::new();
        let mut udp_out: Option<Arc<UdpSocket>> = None;
        match cfg.transport {
            Transport::Udp => {
                let mut sc = SocketConfig::plain(cfg.bind);
                sc.rcvbuf = 4 << 20;
                sc.recv_timeout_us = STOP_POLL.as_micros() as u64;
                let sock = LaneSocket::open(&sc)?;
                addrs.push(sock.local_addr()?);
                // A second descriptor of the same socket for the workers' sends.
                // SAFETY: dup(2) of a descriptor we own; the result is checked.
                let dup = unsafe { libc::dup(sock.as_raw_fd()) };
                if dup < 0 {
                    return Err(ServeError::Io {
                        what: "dup",
                        source: io::Error::last_os_error(),
                    });
                }
                // SAFETY: `dup` is a fresh descriptor owned by nobody else.
                let out = Arc::new(UdpSocket::from(unsafe { OwnedFd::from_raw_fd(dup) }));
                udp_out = Some(out.clone());
                let (stop2, c2, q2, mode, seed) = (
                    stop.clone(),
                    counters.clone(),
                    queue.clone(),
                    cfg.mode,
                    cfg.seed,
                );
                threads.push(
                    std::thread::Builder::new()
                        .name("lancet-udp-rx".into())
                        .spawn(move || {
                            apply_rt(rt, 1, &c2);
                            udp_dispatch(sock, mode, seed, &stop2, &c2, &q2)
                        })
                        .map_err(io_err("spawn"))?,
                );
            }
            Transport::Tcp => {
                let l = TcpListener::bind(cfg.bind).map_err(io_err("bind (tcp)"))?;
                l.set_nonblocking(true).map_err(io_err("set_nonblocking"))?;
                addrs.push(match l.local_addr().map_err(io_err("local_addr"))? {
                    SocketAddr::V4(a) => a,
                    SocketAddr::V6(_) => return Err(ServeError::Config("IPv6 bind".into())),
                });
                let sh = TcpShared {
                    mode: cfg.mode,
                    seed: cfg.seed,
                    rt,
                    stop: stop.clone(),
                    counters: counters.clone(),
                    queue: queue.clone(),
                    conn_threads: conn_threads.clone(),
                };
                threads.push(
                    std::thread::Builder::new()
                        .name("lancet-tcp-accept".into())
                        .spawn(move || {
                            apply_rt(rt, 1, &sh.counters);
                            tcp_accept(l, sh)
                        })
                        .map_err(io_err("spawn"))?,
                );
            }
            Transport::R2p2 => {
                for w in 0..cfg.workers {
                    let port = match cfg.bind.port() {
                        0 => 0,
                        p => p.checked_add(w as u16).ok_or_else(|| {
                            ServeError::Config(format!(
                                "{} workers from port {p} pass port 65535",
                                cfg.workers
                            ))
                        })?,
                    };
                    let bind = SocketAddrV4::new(*cfg.bind.ip(), port);
                    let rcfg = xlane_rpc::ServerConfig {
                        feedback_to: cfg.feedback_to,
                        ..xlane_rpc::ServerConfig::default()
                    };
                    let srv = xlane_rpc::udp::RpcServer::bind(bind, rcfg)
                        .map_err(io_err("bind (r2p2 worker)"))?;
                    addrs.push(srv.local_addr());
                    let (echo, service) = match cfg.mode {
                        ServeMode::Echo => (true, None),
                        ServeMode::Synthetic(s) => (false, Some(s)),
                    };
                    let worker = crate::r2p2::Worker {
                        srv,
                        echo,
                        service,
                        rng: Rng::stream(cfg.seed, SERVER_STREAM + w as u64),
                        queue_cap: cfg.queue_cap.max(1),
                    };
                    let (stop2, c2) = (stop.clone(), counters.clone());
                    threads.push(
                        std::thread::Builder::new()
                            .name(format!("lancet-r2p2-{w}"))
                            .spawn(move || {
                                apply_rt(rt, 0, &c2);
                                worker.run(&stop2, &c2)
                            })
                            .map_err(io_err("spawn"))?,
                    );
                }
            }
        }
        if let (ServeMode::Synthetic(_), Transport::Udp | Transport::Tcp) =
            (cfg.mode, cfg.transport)
        {
            for w in 0..cfg.workers {
                let (stop2, c2, q2, out) = (
                    stop.clone(),
                    counters.clone(),
                    queue.clone(),
                    udp_out.clone(),
                );
                threads.push(
                    std::thread::Builder::new()
                        .name(format!("lancet-worker-{w}"))
                        .spawn(move || {
                            apply_rt(rt, 0, &c2);
                            worker(&q2, &stop2, &c2, out.as_deref())
                        })
                        .map_err(io_err("spawn"))?,
                );
            }
        }
        Ok(Server {
            addrs,
            stop,
            counters,
            threads,
            conn_threads,
        })
    }

    /// The address the server listens on (with the port chosen if 0 was
    /// asked); with R2P2, the first worker's.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.addrs[0]
    }

    /// Every address the server listens on: one, or with R2P2 one per
    /// worker (a router's servers).
    pub fn addrs(&self) -> &[SocketAddrV4] {
        &self.addrs
    }

    /// The counters so far.
    pub fn stats(&self) -> ServerStats {
        self.counters.snapshot()
    }

    /// Whether a stop was asked for (by [`Server::stop`] or a signal handler
    /// calling [`Server::stop_flag`]).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Stop every thread, wait for them, and return the final counters.
    pub fn stop(mut self) -> ServerStats {
        self.shutdown();
        self.counters.snapshot()
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let conns: Vec<_> = lock(&self.conn_threads).drain(..).collect();
        for t in conns {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn udp_dispatch(
    mut sock: LaneSocket,
    mode: ServeMode,
    seed: u64,
    stop: &AtomicBool,
    counters: &Counters,
    queue: &Queue,
) {
    let mut rng = Rng::stream(seed, SERVER_STREAM);
    let mut buf = vec![0u8; MAX_MESSAGE_LEN + 1];
    while !stop.load(Ordering::Relaxed) {
        let got = match sock.recv(&mut buf) {
            Ok(Some(g)) => g,
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // Transient errors (e.g. an ICMP error reported on the socket).
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        if got.truncated {
            bump(&counters.malformed);
            continue;
        }
        let msg = &buf[..got.len];
        match mode {
            ServeMode::Echo => {
                bump(&counters.requests);
                match sock.send_to(msg, got.src) {
                    Ok(_) => bump(&counters.responses),
                    Err(_) => bump(&counters.send_errors),
                }
            }
            ServeMode::Synthetic(service) => match proto::parse_synthetic(msg) {
                Ok(h) if h.kind == SynKind::Request => {
                    bump(&counters.requests);
                    let job = Job {
                        id: h.id,
                        reply: ReplyTo::Udp(got.src),
                        rx_rt_ns: got.rx_ns,
                        service_ns: service.sample(&mut rng),
                    };
                    queue.push(job, counters);
                }
                _ => bump(&counters.malformed),
            },
        }
    }
}

fn worker(queue: &Queue, stop: &AtomicBool, counters: &Counters, udp: Option<&UdpSocket>) {
    while let Some(job) = queue.pop(stop) {
        let start = monotonic_ns();
        spin_until(start.saturating_add(job.service_ns));
        let sojourn = realtime_ns().saturating_sub(job.rx_rt_ns);
        let resp = proto::syn_response(job.id, sojourn);
        let ok = match &job.reply {
            ReplyTo::Udp(dst) => udp.is_some_and(|s| s.send_to(&resp, *dst).is_ok()),
            ReplyTo::Tcp(stream) => lock(stream).write_all(&resp).is_ok(),
        };
        if ok {
            bump(&counters.responses);
        } else {
            bump(&counters.send_errors);
        }
    }
}

/// What the TCP accept loop hands to each connection thread.
struct TcpShared {
    mode: ServeMode,
    seed: u64,
    rt: Option<i32>,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
    queue: Arc<Queue>,
    conn_threads: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

fn tcp_accept(listener: TcpListener, sh: TcpShared) {
    let TcpShared {
        mode,
        seed,
        rt,
        stop,
        counters,
        queue,
        conn_threads,
    } = sh;
    // One generator for all connections keeps "seeded" meaningful; it is
    // shared under a lock (taken once per request).
    let rng = Arc::new(Mutex::new(Rng::stream(seed, SERVER_STREAM)));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                bump(&counters.connections);
                let (stop2, c2, q2, rng2) =
                    (stop.clone(), counters.clone(), queue.clone(), rng.clone());
                let h = std::thread::Builder::new()
                    .name("lancet-tcp-conn".into())
                    .spawn(move || {
                        apply_rt(rt, 1, &c2);
                        let _ = tcp_conn(stream, mode, &rng2, &stop2, &c2, &q2);
                    });
                if let Ok(h) = h {
                    lock(&conn_threads).push(h);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// Length of the synthetic request at the start of `stream`, if whole.
fn syn_request_frame(stream: &[u8]) -> Result<Option<usize>, ProtoError> {
    if stream.len() < SYN_HEADER_LEN {
        return Ok(None);
    }
    let len = u32::from_be_bytes([stream[16], stream[17], stream[18], stream[19]]) as usize;
    if !(SYN_HEADER_LEN..=MAX_MESSAGE_LEN).contains(&len) {
        return Err(ProtoError::BadLength(len as u32));
    }
    Ok((stream.len() >= len).then_some(len))
}

fn tcp_conn(
    stream: TcpStream,
    mode: ServeMode,
    rng: &Mutex<Rng>,
    stop: &AtomicBool,
    counters: &Counters,
    queue: &Queue,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(STOP_POLL))?;
    let mut reader = stream.try_clone()?;
    let writer = Arc::new(Mutex::new(stream));
    let mut buf = vec![0u8; 2 * MAX_MESSAGE_LEN];
    let mut have = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let n = match reader.read(&mut buf[have..]) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        };
        let rx_rt_ns = realtime_ns();
        match mode {
            ServeMode::Echo => {
                bump(&counters.requests);
                lock(&writer).write_all(&buf[..n])?;
                bump(&counters.responses);
            }
            ServeMode::Synthetic(service) => {
                have += n;
                let mut at = 0;
                loop {
                    match syn_request_frame(&buf[at..have]) {
                        Ok(Some(len)) => {
                            match proto::parse_synthetic(&buf[at..at + len]) {
                                Ok(h) if h.kind == SynKind::Request => {
                                    bump(&counters.requests);
                                    let service_ns = service.sample(&mut lock(rng));
                                    let job = Job {
                                        id: h.id,
                                        reply: ReplyTo::Tcp(writer.clone()),
                                        rx_rt_ns,
                                        service_ns,
                                    };
                                    queue.push(job, counters);
                                }
                                _ => {
                                    bump(&counters.malformed);
                                    return Ok(());
                                }
                            }
                            at += len;
                        }
                        Ok(None) => break,
                        Err(_) => {
                            // A byte stream cannot be resynchronised: drop it.
                            bump(&counters.malformed);
                            return Ok(());
                        }
                    }
                }
                buf.copy_within(at..have, 0);
                have -= at; // at <= have: every frame parsed lies in buf[..have]
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn lo() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
    }

    #[test]
    fn udp_echo_echoes() {
        let srv = Server::start(&ServeConfig::echo(lo())).unwrap();
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        c.send_to(b"hello there", srv.local_addr()).unwrap();
        let mut b = [0u8; 64];
        let (n, _) = c.recv_from(&mut b).unwrap();
        assert_eq!(&b[..n], b"hello there");
        let st = srv.stop();
        assert_eq!((st.requests, st.responses), (1, 1));
    }

    #[test]
    fn udp_synthetic_serves_and_refuses_garbage() {
        let cfg = ServeConfig::synthetic(lo(), ServiceDist::Fixed(200_000), 2);
        let srv = Server::start(&cfg).unwrap();
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        c.send_to(b"garbage", srv.local_addr()).unwrap();
        let mut req = [0u8; 48];
        crate::App::Synthetic.write_template(&mut req).unwrap();
        crate::App::Synthetic.set_id(&mut req, 77);
        c.send_to(&req, srv.local_addr()).unwrap();
        let mut b = [0u8; 64];
        let (n, _) = c.recv_from(&mut b).unwrap();
        let r = crate::App::Synthetic.parse_response(&b[..n], 48).unwrap();
        assert_eq!(r.id, 77);
        // The server held it at least for its 200 µs service time.
        assert!(r.server_ns.unwrap() >= 200_000, "{r:?}");
        let st = srv.stop();
        assert_eq!((st.requests, st.responses, st.malformed), (1, 1, 1));
    }

    #[test]
    fn tcp_synthetic_and_echo() {
        for mode in [ServeMode::Echo, ServeMode::Synthetic(ServiceDist::Fixed(0))] {
            let cfg = ServeConfig {
                transport: Transport::Tcp,
                mode,
                ..ServeConfig::echo(lo())
            };
            let srv = Server::start(&cfg).unwrap();
            let mut s = TcpStream::connect(srv.local_addr()).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut two = Vec::new();
            for id in [5u64, 6] {
                let mut req = [0u8; 40];
                crate::App::Synthetic.write_template(&mut req).unwrap();
                crate::App::Synthetic.set_id(&mut req, id);
                two.extend_from_slice(&req);
            }
            s.write_all(&two).unwrap();
            let want = match mode {
                ServeMode::Echo => 80,
                ServeMode::Synthetic(_) => 64,
            };
            let mut got = vec![0u8; want];
            s.read_exact(&mut got).unwrap();
            if mode == ServeMode::Echo {
                assert_eq!(got, two);
            } else {
                let a = crate::App::Synthetic
                    .parse_response(&got[..32], 40)
                    .unwrap();
                let b = crate::App::Synthetic
                    .parse_response(&got[32..], 40)
                    .unwrap();
                assert_eq!((a.id, b.id), (5, 6));
            }
            drop(s);
            let st = srv.stop();
            assert_eq!(st.connections, 1);
        }
    }

    #[test]
    fn zero_workers_refused() {
        let mut cfg = ServeConfig::synthetic(lo(), ServiceDist::Fixed(0), 1);
        cfg.workers = 0;
        assert!(matches!(Server::start(&cfg), Err(ServeError::Config(_))));
    }
}
