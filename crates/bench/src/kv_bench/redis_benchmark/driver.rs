//! A replay of redis-benchmark's default tests that can wait for replicas:
//! redis-benchmark cannot send `WAIT`, so for Redis with replicas this
//! driver sends the same commands on the same keys ([`super::suite`]) the
//! same way — `connections` connections, each with `pipeline` requests in
//! flight, one test after the other, fresh connections per test — and, in
//! write tests, a `WAIT <replicas> 0` after every pipelined batch, whose
//! reply the connection waits for before its next batch. `WAIT` is not
//! counted as a request: requests/s are the test's own commands.
//!
//! One thread drives every connection with `poll(2)`, as redis-benchmark
//! does with its event loop, so the two clients cost the machine alike.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use xlane_host::budget::ThreadUsage;
use xlane_kv::resp::{decode_reply, encode_command, Reply};

use super::suite::Test;

/// How the driver loads a server.
#[derive(Clone, Copy, Debug)]
pub struct DriverConfig {
    /// Connections (redis-benchmark `-c`).
    pub connections: usize,
    /// Requests per pipelined batch (redis-benchmark `-P`).
    pub pipeline: usize,
    /// Requests per test, all connections together (`-n`).
    pub requests: u64,
    /// After every batch of a write test, `WAIT <n> 0`; `None`: no WAIT.
    pub wait_replicas: Option<u32>,
    /// Longest time without any reply before the test fails.
    pub stall: Duration,
}

/// What one test measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TestRun {
    /// The test's name (as redis-benchmark's CSV).
    pub name: String,
    /// Requests answered (WAIT not included).
    pub requests: u64,
    /// From the first request sent to the last reply, ns.
    pub ns: u64,
    /// Error replies (WAIT's included, and a WAIT that answered fewer
    /// replicas than asked).
    pub errors: u64,
    /// The first error reply.
    pub first_error: Option<String>,
    /// CPU time the driver's thread used, ns.
    pub cpu_ns: u64,
}

impl TestRun {
    /// Requests per second.
    pub fn rps(&self) -> f64 {
        self.requests as f64 * 1e9 / self.ns.max(1) as f64
    }
}

/// Why the driver stopped.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// A connection could not be made.
    #[error("connect to {addr}: {source}")]
    Connect {
        /// Server.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// A socket failed or closed mid-test.
    #[error("{test}: {message}")]
    Io {
        /// Test.
        test: String,
        /// What happened.
        message: String,
    },
    /// No reply for the stall time.
    #[error("{test}: no reply for {secs:.1} s")]
    Stalled {
        /// Test.
        test: String,
        /// Seconds waited.
        secs: f64,
    },
    /// `interrupted` said to stop.
    #[error("interrupted")]
    Interrupted,
}

struct Conn {
    stream: TcpStream,
    out: Vec<u8>,
    sent: usize,
    inbuf: Vec<u8>,
    read_at: usize,
    /// Replies still to come for the batch in flight.
    awaiting: usize,
    /// Of those, the last is a WAIT's.
    wait_pending: bool,
}

/// Runs `tests` (e.g. [`super::suite::DEFAULT_TESTS`], or a run of them) against
/// `addr`, in order; `interrupted` is asked between polls.
pub fn run_suite(
    addr: SocketAddr,
    tests: &[Test],
    cfg: &DriverConfig,
    interrupted: &dyn Fn() -> bool,
) -> Result<Vec<TestRun>, DriverError> {
    tests
        .iter()
        .map(|t| run_test(addr, t, cfg, interrupted))
        .collect()
}

/// Runs one test against `addr`.
pub fn run_test(
    addr: SocketAddr,
    test: &Test,
    cfg: &DriverConfig,
    interrupted: &dyn Fn() -> bool,
) -> Result<TestRun, DriverError> {
    let io = |m: String| DriverError::Io {
        test: test.name.to_string(),
        message: m,
    };
    let mut conns = Vec::with_capacity(cfg.connections);
    for _ in 0..cfg.connections.max(1) {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|source| DriverError::Connect { addr, source })?;
        let _ = s.set_nodelay(true);
        s.set_nonblocking(true).map_err(|e| io(e.to_string()))?;
        conns.push(Conn {
            stream: s,
            out: Vec::with_capacity(4096),
            sent: 0,
            inbuf: Vec::with_capacity(1 << 16),
            read_at: 0,
            awaiting: 0,
            wait_pending: false,
        });
    }
    let mut request = Vec::new();
    test.encode(&mut request);
    let mut wait = Vec::new();
    let wait_n = cfg.wait_replicas.filter(|_| test.write);
    if let Some(n) = wait_n {
        encode_command(
            &[b"WAIT".to_vec(), n.to_string().into_bytes(), b"0".to_vec()],
            &mut wait,
        );
    }
    let mut run = TestRun {
        name: test.name.to_string(),
        ..TestRun::default()
    };
    let cpu0 = ThreadUsage::current();
    let start = Instant::now();
    let mut issued = 0u64;
    for c in &mut conns {
        issued += batch(c, &request, &wait, cfg, issued);
    }
    let mut chunk = vec![0u8; 1 << 16];
    let mut fds: Vec<libc::pollfd> = Vec::with_capacity(conns.len());
    let mut last_progress = Instant::now();
    loop {
        if conns.iter().all(|c| c.awaiting == 0) {
            break;
        }
        if interrupted() {
            return Err(DriverError::Interrupted);
        }
        fds.clear();
        fds.extend(conns.iter().map(|c| libc::pollfd {
            fd: c.stream.as_raw_fd(),
            events: libc::POLLIN
                | if c.sent < c.out.len() {
                    libc::POLLOUT
                } else {
                    0
                },
            revents: 0,
        }));
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(io(format!("poll: {e}")));
        }
        if n == 0 {
            if last_progress.elapsed() > cfg.stall {
                return Err(DriverError::Stalled {
                    test: test.name.to_string(),
                    secs: cfg.stall.as_secs_f64(),
                });
            }
            continue;
        }
        for (c, p) in conns.iter_mut().zip(&fds) {
            if p.revents == 0 {
                continue;
            }
            if c.sent < c.out.len() {
                match c.stream.write(&c.out[c.sent..]) {
                    Ok(k) => c.sent += k,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(io(e.to_string())),
                }
            }
            if p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
                continue;
            }
            match c.stream.read(&mut chunk) {
                Ok(0) => return Err(io("connection closed by the server".into())),
                Ok(k) => c.inbuf.extend_from_slice(&chunk[..k]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                Err(e) => return Err(io(e.to_string())),
            }
            last_progress = Instant::now();
            while c.awaiting > 0 {
                let Some((reply, used)) = decode_reply(&c.inbuf[c.read_at..])
                    .map_err(|e| io(format!("bad reply: {e}")))?
                else {
                    break;
                };
                c.read_at += used;
                c.awaiting -= 1;
                let is_wait = c.wait_pending && c.awaiting == 0;
                let bad = match (&reply, is_wait) {
                    (Reply::Error(e), _) => Some(e.clone()),
                    (Reply::Integer(k), true) if wait_n.is_some_and(|n| *k < i64::from(n)) => {
                        Some(format!("WAIT answered {k} replicas"))
                    }
                    _ => None,
                };
                if !is_wait {
                    run.requests += 1;
                }
                if let Some(e) = bad {
                    run.errors += 1;
                    run.first_error.get_or_insert(e);
                }
            }
            if c.read_at == c.inbuf.len() {
                c.inbuf.clear();
                c.read_at = 0;
            }
            if c.awaiting == 0 {
                issued += batch(c, &request, &wait, cfg, issued);
            }
        }
    }
    run.ns = start.elapsed().as_nanos() as u64;
    run.cpu_ns = ThreadUsage::current().since(&cpu0).cpu_ns;
    Ok(run)
}

/// Queues `c`'s next batch (up to `pipeline` requests, fewer when the
/// test is nearly done, then the WAIT if any) and writes what the socket
/// takes; returns the requests queued.
fn batch(c: &mut Conn, request: &[u8], wait: &[u8], cfg: &DriverConfig, issued: u64) -> u64 {
    let k = (cfg.requests.saturating_sub(issued)).min(cfg.pipeline.max(1) as u64);
    if k == 0 {
        return 0;
    }
    c.out.clear();
    c.sent = 0;
    for _ in 0..k {
        c.out.extend_from_slice(request);
    }
    c.out.extend_from_slice(wait);
    c.awaiting = k as usize + usize::from(!wait.is_empty());
    c.wait_pending = !wait.is_empty();
    if let Ok(n) = c.stream.write(&c.out) {
        c.sent = n;
    }
    k
}
