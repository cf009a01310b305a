//! Part 2's processes: the runners and stand-in applications of every host, the
//! signals and link cuts injected into them.

use super::config::{APP_FIFO, RUNNER_EVENTS, RUNNER_FIFO, RUNNER_GROUP, RUNNER_PORT};
use super::error::FdBenchError;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xlane_fd::AliveTable;
use xlane_host::socket::realtime_ns;
use xlane_testbed::{HostInfo, Testbed};

/// Every process of part 2, stopped and reaped on drop (also on error).
pub(super) struct Fleet {
    pub(super) bin: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) hosts: Vec<HostInfo>,
    pub(super) period_ns: u64,
    pub(super) lambda_ns: u64,
    pub(super) stall: u32,
    pub(super) seconds: u64,
    pub(super) lane_core: usize,
    pub(super) mlock: bool,
    pub(super) runners: Vec<Option<Child>>,
    pub(super) apps: Vec<Option<Child>>,
    pub(super) stopped: Vec<bool>,
    /// A link that is down: (switch namespace, port).
    pub(super) cut: Option<(String, String)>,
    pub(super) started: usize,
}

pub(super) fn io_file(path: &Path) -> impl FnOnce(std::io::Error) -> FdBenchError + '_ {
    move |source| FdBenchError::File {
        path: path.to_path_buf(),
        source,
    }
}

/// A signal the benchmark sends.
#[derive(Clone, Copy, Debug)]
pub(super) enum Sig {
    Kill,
    Term,
    Stop,
    Cont,
}

impl Sig {
    fn number(self) -> libc::c_int {
        match self {
            Sig::Kill => libc::SIGKILL,
            Sig::Term => libc::SIGTERM,
            Sig::Stop => libc::SIGSTOP,
            Sig::Cont => libc::SIGCONT,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Sig::Kill => "SIGKILL",
            Sig::Term => "SIGTERM",
            Sig::Stop => "SIGSTOP",
            Sig::Cont => "SIGCONT",
        }
    }
}

/// Sends `sig` to `pid`, a child this process started and has not reaped.
pub(super) fn signal(pid: u32, sig: Sig) -> Result<(), FdBenchError> {
    let p = libc::pid_t::try_from(pid).map_err(|_| FdBenchError::Signal {
        signal: sig.name(),
        pid,
        source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
    })?;
    // SAFETY: kill(2) has no memory-safety preconditions.
    if unsafe { libc::kill(p, sig.number()) } != 0 {
        return Err(FdBenchError::Signal {
            signal: sig.name(),
            pid,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Sets interface `ifname` of namespace `netns` up or down with
/// `SIOCSIFFLAGS`, from a thread that entered the namespace. Returns the
/// `CLOCK_REALTIME` instant just before the request (it takes effect
/// before the call returns: the veth pair loses its carrier at once).
fn set_link(netns: &str, ifname: &str, up: bool) -> Result<u64, FdBenchError> {
    let err = |detail: String| FdBenchError::Link {
        port: ifname.to_string(),
        detail,
    };
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(err("bad interface name".into()));
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ns = xlane_testbed::enter_netns(netns).map_err(|e| err(e.to_string()))?;
            let sock = std::net::UdpSocket::bind("127.0.0.1:0")
                .map_err(|e| err(format!("socket: {e}")))?;
            let fd = std::os::fd::AsRawFd::as_raw_fd(&sock);
            // SAFETY: ifreq is plain old data; all-zero is a valid value.
            let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
            for (d, &b) in req.ifr_name.iter_mut().zip(name) {
                *d = b as libc::c_char;
            }
            // SAFETY: a valid socket and a valid, NUL-terminated ifreq.
            if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) } != 0 {
                return Err(err(format!(
                    "SIOCGIFFLAGS: {}",
                    std::io::Error::last_os_error()
                )));
            }
            // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
            let flags = unsafe { req.ifr_ifru.ifru_flags };
            let upf = libc::IFF_UP as libc::c_short;
            req.ifr_ifru.ifru_flags = if up { flags | upf } else { flags & !upf };
            let t0 = realtime_ns();
            // SAFETY: as above.
            if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) } != 0 {
                return Err(err(format!(
                    "SIOCSIFFLAGS: {}",
                    std::io::Error::last_os_error()
                )));
            }
            Ok(t0)
        })
        .join()
        .unwrap_or_else(|_| Err(err("link thread panicked".into())))
    })
}

/// The last lines of a process's stderr file, for error messages.
pub(super) fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

impl Fleet {
    fn counter(&self, h: usize) -> PathBuf {
        self.dir.join(format!("h{h}.counter"))
    }
    fn table(&self, h: usize) -> PathBuf {
        self.dir.join(format!("h{h}.table"))
    }
    fn errfile(&self, h: usize, what: &str) -> PathBuf {
        self.dir.join(format!("h{h}.{what}.stderr"))
    }

    fn stderr_to(&self, path: &Path) -> Result<Stdio, FdBenchError> {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_file(path))?;
        Ok(Stdio::from(f))
    }

    /// Starts host `h`'s stand-in application; returns once its counter exists.
    pub(super) fn start_app(&mut self, h: usize) -> Result<(), FdBenchError> {
        let err = self.errfile(h, "app");
        let child = Command::new(&self.bin)
            .args(["fd", "bump", "--counter"])
            .arg(self.counter(h))
            .args([
                "--interval",
                &format!("{}ns", (self.period_ns / 3).max(1)),
                "--fifo",
                &APP_FIFO.to_string(),
                "--seconds",
                &self.seconds.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.stderr_to(&err)?)
            .spawn()
            .map_err(|source| FdBenchError::Spawn {
                what: format!("{} fd bump", self.bin.display()),
                source,
            })?;
        self.apps[h] = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(c) = xlane_fd::LivenessCounter::open(self.counter(h)) {
                if c.read() > 0 {
                    return Ok(());
                }
            }
            if let Some(Ok(Some(st))) = self.apps[h].as_mut().map(|c| c.try_wait()) {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: format!("application exited ({st}): {}", tail(&err)),
                });
            }
            if Instant::now() > deadline {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: "application did not bump its counter".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts host `h`'s X-FD runner; returns its table once it is up.
    pub(super) fn start_runner(&mut self, h: usize) -> Result<AliveTable, FdBenchError> {
        let host = &self.hosts[h];
        let peers: Vec<String> = self
            .hosts
            .iter()
            .map(|o| SocketAddrV4::new(o.addr, RUNNER_PORT).to_string())
            .collect();
        let err = self.errfile(h, "runner");
        let child = Command::new(&self.bin)
            .args(["fd", "run", "--netns", &host.netns, "--bind"])
            .arg(SocketAddrV4::new(host.addr, RUNNER_PORT).to_string())
            .arg("--group")
            .arg(SocketAddrV4::new(RUNNER_GROUP, RUNNER_PORT).to_string())
            .arg("--peer")
            .arg(peers.join(","))
            .args(["--period", &format!("{}ns", self.period_ns)])
            .args(["--lambda", &format!("{}ns", self.lambda_ns)])
            .args(["--stall", &self.stall.to_string()])
            .arg("--counter")
            .arg(self.counter(h))
            .arg("--table")
            .arg(self.table(h))
            .args(["--events", &RUNNER_EVENTS.to_string()])
            .args(["--core", &self.lane_core.to_string()])
            .args(["--fifo", &RUNNER_FIFO.to_string()])
            .args(["--seconds", &self.seconds.to_string(), "--quiet"])
            .args(if self.mlock {
                &[][..]
            } else {
                &["--no-mlock"][..]
            })
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.stderr_to(&err)?)
            .spawn()
            .map_err(|source| FdBenchError::Spawn {
                what: format!("{} fd run", self.bin.display()),
                source,
            })?;
        let pid = child.id();
        self.runners[h] = Some(child);
        self.started += 1;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(t) = AliveTable::open(self.table(h)) {
                if t.info().writer_pid == pid {
                    return Ok(t);
                }
            }
            if let Some(Ok(Some(st))) = self.runners[h].as_mut().map(|c| c.try_wait()) {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: format!("runner exited ({st}): {}", tail(&err)),
                });
            }
            if Instant::now() > deadline {
                return Err(FdBenchError::NotReady {
                    host: h,
                    detail: "runner did not publish its table".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub(super) fn pid(slot: &Option<Child>) -> Option<u32> {
        slot.as_ref().map(|c| c.id())
    }

    /// Cuts host `h`'s link at the switch; returns the instant just before.
    pub(super) fn cut_link(&mut self, tb: &Testbed, h: usize) -> Result<u64, FdBenchError> {
        let port = tb
            .switch_port(h)
            .ok_or_else(|| FdBenchError::Link {
                port: format!("of host {h}"),
                detail: "no such switch port".into(),
            })?
            .to_string();
        let sw = tb.switch_netns().to_string();
        self.cut = Some((sw.clone(), port.clone()));
        set_link(&sw, &port, false)
    }

    /// Restores the cut link.
    pub(super) fn restore_link(&mut self) -> Result<(), FdBenchError> {
        match self.cut.take() {
            Some((sw, port)) => set_link(&sw, &port, true).map(|_| ()),
            None => Ok(()),
        }
    }

    pub(super) fn shutdown(&mut self) {
        let _ = self.restore_link();
        for (h, stopped) in self.stopped.iter_mut().enumerate() {
            if *stopped {
                if let Some(pid) = Fleet::pid(&self.apps[h]) {
                    let _ = signal(pid, Sig::Cont);
                }
                *stopped = false;
            }
        }
        let mut all: Vec<Child> = self
            .runners
            .iter_mut()
            .chain(self.apps.iter_mut())
            .filter_map(Option::take)
            .collect();
        for c in &all {
            let _ = signal(c.id(), Sig::Term);
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        for c in &mut all {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        self.shutdown();
    }
}
