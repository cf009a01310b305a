//! The processes and threads of the cross-check: `sockperf server` and
//! `ping-pong` (placed with `taskset`/`chrt`), the `SCHED_IDLE` spinner, and
//! pinning the caller's thread.

use super::{CrossCheckConfig, CrossCheckError, SockperfRound};
use crate::proto::App;
use crate::sockperf::{self, SockperfParseError};
use std::io::{self, Read};
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the server may take to answer its first request.
const SERVER_START_TIMEOUT: Duration = Duration::from_secs(5);

/// Kills the child (by its own PID) when dropped.
pub(super) struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Removes the file when dropped.
pub(super) struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A `SCHED_IDLE` thread spinning on one CPU for as long as this lives:
/// the vCPU then never halts (the effect of booting with `idle=poll`), and
/// a request never waits for the hypervisor to wake it. It runs only when
/// nothing else wants that CPU, so it delays nobody.
pub(super) struct IdleSpinner {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl IdleSpinner {
    pub(super) fn start(cpu: usize) -> Result<Self, CrossCheckError> {
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(format!("idle-spin-cpu{cpu}"))
            .spawn(move || {
                let setup = pin_thread(cpu).and_then(|()| {
                    let p = libc::sched_param { sched_priority: 0 };
                    // SAFETY: pid 0 is this thread; p is a valid sched_param.
                    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &p) };
                    if r == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::last_os_error())
                    }
                });
                let ok = setup.is_ok();
                let _ = tx.send(setup);
                while ok && !s2.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .map_err(|source| CrossCheckError::Spinner { cpu, source })?;
        // Dropped on an error: stops and joins the thread.
        let sp = IdleSpinner {
            stop,
            thread: Some(thread),
        };
        match rx.recv() {
            Ok(Ok(())) => Ok(sp),
            Ok(Err(source)) => Err(CrossCheckError::Spinner { cpu, source }),
            Err(_) => Err(CrossCheckError::Spinner {
                cpu,
                source: io::Error::other("the spinner thread died"),
            }),
        }
    }
}

impl Drop for IdleSpinner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Pin the calling thread (and the threads it starts from now on) to `cpu`.
pub(super) fn pin_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CPU number out of range",
        ));
    }
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it (cpu is
    // below CPU_SETSIZE); sched_setaffinity(0, ..) applies to this thread.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's affinity, restored when dropped.
pub(super) struct AffinityGuard(libc::cpu_set_t);

impl AffinityGuard {
    /// Remember the calling thread's affinity, then pin it to `cpu`.
    pub(super) fn pin(cpu: usize) -> Result<Self, CrossCheckError> {
        // SAFETY: a zeroed cpu_set_t is valid and sized as passed;
        // sched_getaffinity(0, ..) reads this thread's mask into it.
        let saved = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Err(CrossCheckError::Pin {
                    cpu,
                    source: io::Error::last_os_error(),
                });
            }
            set
        };
        pin_thread(cpu).map_err(|source| CrossCheckError::Pin { cpu, source })?;
        Ok(AffinityGuard(saved))
    }
}

impl Drop for AffinityGuard {
    fn drop(&mut self) {
        // SAFETY: self.0 is a mask this thread had; pid 0 is this thread.
        let _ =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) };
    }
}

/// `sockperf --version`, or an error naming the package when it is missing.
pub fn sockperf_version() -> Result<Option<String>, CrossCheckError> {
    match Command::new("sockperf").arg("--version").output() {
        Ok(o) => Ok(sockperf::parse_version(&format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(CrossCheckError::NotInstalled {
            program: "sockperf",
            hint: "install the Debian package `sockperf` (apt-get install sockperf; \
                   scripts/test.sh does)",
        }),
        Err(source) => Err(CrossCheckError::Spawn {
            command: "sockperf --version".into(),
            source,
        }),
    }
}

/// A command, prefixed with `taskset -c CPU` and `chrt -f P` as asked.
pub(super) fn placed(cpu: Option<usize>, priority: Option<i32>, args: &[String]) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(c) = cpu {
        v.extend(["taskset".into(), "-c".into(), c.to_string()]);
    }
    if let Some(p) = priority {
        v.extend(["chrt".into(), "-f".into(), p.to_string()]);
    }
    v.extend_from_slice(args);
    v
}

pub(super) fn spawn_error(argv: &[String], source: io::Error) -> CrossCheckError {
    if source.kind() == io::ErrorKind::NotFound {
        let program = match argv.first().map(String::as_str) {
            Some("taskset") => Some("taskset"),
            Some("chrt") => Some("chrt"),
            Some("sockperf") => Some("sockperf"),
            _ => None,
        };
        if let Some(program) = program {
            return CrossCheckError::NotInstalled {
                program,
                hint: if program == "sockperf" {
                    "install the Debian package `sockperf`"
                } else {
                    "install the Debian package `util-linux`"
                },
            };
        }
    }
    CrossCheckError::Spawn {
        command: argv.join(" "),
        source,
    }
}

pub(super) fn command(argv: &[String]) -> Command {
    let mut c = Command::new(&argv[0]);
    c.args(&argv[1..]);
    c
}

pub(super) fn free_udp_port() -> Result<u16, CrossCheckError> {
    let err = |source| CrossCheckError::Spawn {
        command: "bind an ephemeral UDP port on 127.0.0.1".into(),
        source,
    };
    let s = UdpSocket::bind("127.0.0.1:0").map_err(err)?;
    Ok(s.local_addr().map_err(err)?.port())
}

/// Start `sockperf server` and wait until it answers one request of ours.
pub(super) fn start_server(cfg: &CrossCheckConfig, port: u16) -> Result<Killed, CrossCheckError> {
    let argv = placed(
        cfg.placement.map(|p| p.server_cpu),
        cfg.server_priority,
        &[
            "sockperf".into(),
            "server".into(),
            "-i".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
        ],
    );
    let child = command(&argv)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| spawn_error(&argv, e))?;
    let mut server = Killed(child);
    let io_err = |source| CrossCheckError::Spawn {
        command: "a UDP socket to probe the server".into(),
        source,
    };
    let s = UdpSocket::bind("127.0.0.1:0").map_err(io_err)?;
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(io_err)?;
    let mut req = vec![0u8; cfg.size];
    App::Sockperf
        .write_template(&mut req)
        .map_err(|e| CrossCheckError::Config(e.to_string()))?;
    App::Sockperf.set_id(&mut req, 1);
    let deadline = Instant::now() + SERVER_START_TIMEOUT;
    let mut buf = vec![0u8; cfg.size + 64];
    while Instant::now() < deadline {
        if let Ok(Some(status)) = server.0.try_wait() {
            let mut stderr = String::new();
            if let Some(mut e) = server.0.stderr.take() {
                let _ = e.read_to_string(&mut stderr);
            }
            return Err(CrossCheckError::ServerExited {
                command: argv.join(" "),
                status,
                stderr: stderr.trim().to_string(),
            });
        }
        let _ = s.send_to(&req, ("127.0.0.1", port));
        if let Ok((n, _)) = s.recv_from(&mut buf) {
            if App::Sockperf.parse_response(&buf[..n], cfg.size).is_ok() {
                return Ok(server);
            }
        }
    }
    Err(CrossCheckError::ServerSilent {
        command: argv.join(" "),
        timeout_s: SERVER_START_TIMEOUT.as_secs(),
    })
}

/// One sockperf ping-pong round: its record and its round trips (ns).
pub(super) fn sockperf_round(
    cfg: &CrossCheckConfig,
    port: u16,
    round: usize,
) -> Result<(SockperfRound, Vec<u64>), CrossCheckError> {
    let log = TempFile(std::env::temp_dir().join(format!(
        "xlane-lancet-cross-check-{}-{round}.csv",
        std::process::id()
    )));
    let argv = placed(
        cfg.placement.map(|p| p.client_cpu),
        None,
        &[
            "sockperf".into(),
            "ping-pong".into(),
            "-i".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-m".into(),
            cfg.size.to_string(),
            "--mps".into(),
            cfg.rate.to_string(),
            "-t".into(),
            cfg.round_seconds.to_string(),
            "--nonblocked".into(),
            "--full-rtt".into(),
            "--full-log".into(),
            log.0.display().to_string(),
        ],
    );
    let out = command(&argv)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| spawn_error(&argv, e))?;
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(CrossCheckError::PingPong {
            command: argv.join(" "),
            status: out.status,
            output,
        });
    }
    let summary = match sockperf::parse(&output) {
        Ok(s) => s,
        // A result, not a failure of the tool: the server did not answer
        // for the whole round.
        Err(SockperfParseError::NoReplies) => {
            let rec = SockperfRound {
                round,
                observations: Some(0),
                logged: 0,
                no_replies: true,
                dropped: None,
                printed: Vec::new(),
            };
            return Ok((rec, Vec::new()));
        }
        Err(source) => return Err(CrossCheckError::Parse { source, output }),
    };
    let full = std::fs::read_to_string(&log.0).map_err(|source| CrossCheckError::FullLog {
        path: log.0.clone(),
        source,
    })?;
    let rtts: Vec<u64> = sockperf::parse_full_log(&full)
        .into_iter()
        .map(|v| v.round() as u64)
        .collect();
    let printed = cfg
        .percentiles
        .iter()
        .filter_map(|&p| summary.at(p).map(|v| (p, v)))
        .collect();
    Ok((
        SockperfRound {
            round,
            observations: summary.observations,
            logged: rtts.len(),
            no_replies: false,
            dropped: summary.dropped,
            printed,
        },
        rtts,
    ))
}
