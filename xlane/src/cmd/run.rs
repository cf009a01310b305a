//! `xlane run`: an unmodified program on a QJump level (QJump's
//! application utility).
//!
//! 1. **Marking.** A dynamically linked program (and everything it starts)
//!    is run with `LD_PRELOAD=libxlane_preload.so` and the variables of
//!    `xlane_level::env`: its IPv4/IPv6 sockets carry the level's DSCP and
//!    `SO_PRIORITY` (only sockets of `--ports`, when given). A static or Go
//!    binary (such as etcd) bypasses libc; its traffic is marked from
//!    outside by port instead (`xlane_host::level::PortClassifier`: a
//!    netfilter DSCP rule per port, since this kernel's `tc` has no action
//!    that rewrites the DSCP), so it needs `--ports` and root.
//! 2. **Rate.** The level may send `f` packets of `P` bytes per network
//!    epoch `2nP/R` (`xlane_te::qjump`). With `--controller` the rate is
//!    admitted like a tunnel (a request for one `P`-byte packet every
//!    `epoch/f` from `--host` to `--to`), and the granted period sets it;
//!    without, the defaults below (`--hosts`, `--link-rate`,
//!    `--packet-bytes`) do. The host paces the level to that rate with an
//!    HTB class on `--dev` (`xlane_host::level::Pacing`), undone at exit.
//! 3. The run prints, on stderr, the path taken (preload or classifier),
//!    the rate and where it is paced, and the level's latency bound.
//!
//! The program's exit status is `xlane run`'s; SIGINT, SIGTERM and SIGHUP
//! are passed on to it, and it is killed if `xlane run` dies.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::sys::signal::{SigSet, Signal};
use xlane_host::level::{default_interface, LevelHostError, Pacing, PortClassifier};
use xlane_level::env::{ENV_PORTS, ENV_PRIORITY, ENV_TOS};
use xlane_level::{elf_kind, parse_ports, ElfKind, LevelSpec, PortSet};
use xlane_stats::fmt_ns;
use xlane_te::qjump::QjumpParams;

/// Arguments of `xlane run`.
#[derive(clap::Args)]
#[command(after_help = "\
Levels: 2 = DSCP 46 (EF), SO_PRIORITY 6, f = 1 (bound guaranteed); 1 = DSCP 40 (CS5), \
SO_PRIORITY 5, f = n (bound statistical); 0 = best effort (nothing paced).

Paths: a dynamically linked program is preloaded with libxlane_preload.so (found next to \
the xlane binary, or XLANE_PRELOAD_LIB); it marks sockets at socket/bind/connect/accept/accept4 \
(and before the first sendto/sendmsg to a listed port) and re-applies the level after the program's own setsockopt of IP_TOS, IPV6_TCLASS or \
SO_PRIORITY. A static or Go binary (etcd) cannot be preloaded: its packets to and from \
--ports get the level's DSCP from netfilter rules (iptables-legacy, mangle POSTROUTING; \
needs root and --ports). The run says on stderr which path it took.

Environment given to the program: LD_PRELOAD, XLANE_LEVEL_TOS (TOS byte), \
XLANE_LEVEL_PRIORITY (SO_PRIORITY), XLANE_LEVEL_PORTS (comma-separated; unset = all sockets).

Default rate (no --controller): f packets of --packet-bytes per epoch 2·n·P/R with \
n = --hosts (16), P = 1500 B, R = --link-rate (10gbit): level 2 gets 1500 B per 38.4 µs \
= 312.5 Mbit/s; pass the real n and R.")]
pub struct Args {
    /// The QJump level: 0, 1 or 2 (highest).
    #[arg(long)]
    level: u8,
    /// Only sockets whose local or remote port is one of these
    /// (comma-separated, at most 32). Needed for static and Go binaries.
    #[arg(long)]
    ports: Option<String>,
    /// The interface to pace on (default: the default route's, or the only
    /// interface besides loopback). Needs root.
    #[arg(long)]
    dev: Option<String>,
    /// Do not pace (no tc change): marking only.
    #[arg(long)]
    no_pace: bool,
    /// n: hosts sharing the network (QJump's epoch 2nP/R).
    #[arg(long, default_value_t = 16)]
    hosts: u32,
    /// R: the slowest link's rate (e.g. 40mbit, 10gbit).
    #[arg(long, default_value = "10gbit")]
    link_rate: String,
    /// P: the largest packet, bytes.
    #[arg(long, default_value_t = 1500)]
    packet_bytes: u32,
    /// The X-Lane controller: the level's rate is admitted like a tunnel.
    /// A replicated controller's replicas comma-separated (the serving one
    /// is found; the tunnel is released through whichever serves at exit).
    #[arg(long, requires_all = ["keys", "host", "to"], value_delimiter = ',')]
    controller: Vec<SocketAddr>,
    /// Keys file holding --host's key (with --controller).
    #[arg(long)]
    keys: Option<PathBuf>,
    /// This host's name at the controller.
    #[arg(long)]
    host: Option<String>,
    /// The hosts the level's traffic goes to (comma-separated; with
    /// --controller).
    #[arg(long, value_delimiter = ',')]
    to: Vec<String>,
    /// Run the program on these CPUs only (comma-separated), e.g. the lane
    /// core: the level's endhost side (X-Lane's isolation), which a
    /// network level alone does not give.
    #[arg(long, value_delimiter = ',')]
    cpus: Vec<usize>,
    /// Run the program at this nice value (-20..=19).
    #[arg(long, allow_hyphen_values = true, value_parser = clap::value_parser!(i32).range(-20..=19))]
    nice: Option<i32>,
    /// The program and its arguments (after `--`).
    #[arg(last = true, required = true, num_args = 1..)]
    cmd: Vec<OsString>,
}

/// Why `xlane run` could not start the program.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// No such level.
    #[error("no level {0}: levels are 0, 1 and 2")]
    BadLevel(u8),
    /// A bad `--ports`.
    #[error("--ports {input:?}: {reason}")]
    BadPorts {
        /// The value.
        input: String,
        /// Why.
        reason: xlane_level::ConfigError,
    },
    /// A bad `--link-rate`.
    #[error("--link-rate: {0}")]
    BadRate(String),
    /// QJump parameters unusable.
    #[error("QJump parameters: {0}")]
    Qjump(#[from] xlane_te::qjump::QjumpError),
    /// The program was not found or not readable.
    #[error("{program}: {detail}")]
    Program {
        /// The program.
        program: String,
        /// Why.
        detail: String,
    },
    /// A static binary without ports.
    #[error(
        "{0} is a {1} binary: it cannot be preloaded, and its traffic can only be marked \
         by port: give --ports"
    )]
    NeedsPorts(String, &'static str),
    /// The preload library is missing.
    #[error(
        "libxlane_preload.so not found next to {0} (build it: cargo build --release -p \
         xlane-preload, or set XLANE_PRELOAD_LIB)"
    )]
    NoLibrary(String),
    /// Pacing or the classifier failed.
    #[error("{0}")]
    Host(#[from] LevelHostError),
    /// The controller refused or could not be reached.
    #[error("controller: {0}")]
    Controller(String),
    /// No interface to pace on.
    #[error("no interface to pace on: give --dev, or --no-pace")]
    NoInterface,
    /// The program could not be started or waited for.
    #[error("{0}")]
    Spawn(String),
}

fn say(msg: &str) {
    eprintln!("xlane run: {msg}");
}

fn fmt_rate(bps: u64) -> String {
    if bps >= 1_000_000 {
        format!("{:.2} Mbit/s", bps as f64 / 1e6)
    } else {
        format!("{:.1} kbit/s", bps as f64 / 1e3)
    }
}

/// `program` on `PATH` (or as given, if it holds a `/`).
fn resolve(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return program.is_file().then(|| program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The preload library: `XLANE_PRELOAD_LIB`, or next to this executable.
fn library() -> Result<PathBuf, RunError> {
    if let Some(p) = std::env::var_os("XLANE_PRELOAD_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| RunError::Spawn(e.to_string()))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let lib = dir.join("libxlane_preload.so");
    if lib.is_file() {
        Ok(lib)
    } else {
        Err(RunError::NoLibrary(exe.display().to_string()))
    }
}

/// The level's rate: from the controller's grant, or QJump's default.
struct Rate {
    bps: u64,
    factor: u32,
    epoch_ns: u64,
    source: String,
    /// The granted tunnel, released when dropped.
    tunnel: Option<HeldTunnel>,
    tunnel_bound_ns: Option<u64>,
}

/// A tunnel the controller granted for the program: released when this
/// is dropped, whether the program ran or `xlane run` failed after the
/// grant (pacing, the classifier, the preload library, starting it).
struct HeldTunnel {
    /// The connection it was granted on.
    client: xlane_ctl::client::Client,
    tunnel: xlane_ctl::proto::TunnelId,
    /// To connect again with, through every controller replica.
    key: xlane_ctl::auth::Key,
    controllers: Vec<std::net::SocketAddr>,
}

impl Drop for HeldTunnel {
    fn drop(&mut self) {
        let t = self.tunnel;
        // The replica that granted it may have stopped serving since:
        // once more through the whole list.
        let released = self.client.release(t).or_else(|_| {
            super::ctl::connect_as(&self.controllers, self.client.host(), &self.key)
                .and_then(|mut c| c.release(t).map_err(|e| e.to_string()))
        });
        match released {
            Ok(_) => say(&format!("released tunnel {}", t.0)),
            Err(e) => say(&format!("releasing tunnel {}: {e}", t.0)),
        }
    }
}

fn rate(a: &Args, spec: &LevelSpec) -> Result<Option<Rate>, RunError> {
    let Some(factor) = spec.factor_for(a.hosts) else {
        return Ok(None);
    };
    let r = xlane_testbed::config::parse_rate(&a.link_rate)
        .map_err(|e| RunError::BadRate(e.to_string()))?;
    let q = QjumpParams {
        hosts: a.hosts,
        max_packet_bytes: a.packet_bytes,
        rate_bps: r,
        synchronized: false,
    };
    let epoch_ns = q.epoch_ns()?;
    let bps = q.rate_limit_bps(factor)?;
    let mut out = Rate {
        bps,
        factor,
        epoch_ns,
        source: format!(
            "default: n = {}, P = {} B, R = {}",
            a.hosts,
            a.packet_bytes,
            fmt_rate(r)
        ),
        tunnel: None,
        tunnel_bound_ns: None,
    };
    if let (false, Some(keys), Some(host)) = (a.controller.is_empty(), &a.keys, &a.host) {
        let key = super::ctl::host_key(keys, host).map_err(RunError::Controller)?;
        let mut c =
            super::ctl::connect_as(&a.controller, host, &key).map_err(RunError::Controller)?;
        let ctl = c.peer_addr();
        let period = (epoch_ns / factor as u64).max(1);
        let sublane = 2 - spec.level.min(2);
        let g = c
            .request(&a.to, a.packet_bytes, period, sublane)
            .map_err(|e| RunError::Controller(e.to_string()))?;
        let pi = g.resources.period_ns.max(1);
        out.bps = (a.packet_bytes as u128 * 8 * 1_000_000_000 / pi as u128) as u64;
        out.source = format!(
            "controller {ctl}: tunnel {} from {host} to {}, one {} B packet every {}{}",
            g.tunnel.0,
            a.to.join(","),
            a.packet_bytes,
            fmt_ns(pi),
            if g.period_raised {
                " (period raised)"
            } else {
                ""
            }
        );
        out.tunnel_bound_ns = Some(g.resources.max_latency_ns());
        out.tunnel = Some(HeldTunnel {
            client: c,
            tunnel: g.tunnel,
            key,
            controllers: a.controller.clone(),
        });
    }
    Ok(Some(out))
}

/// Runs the command; exits the process with the program's status.
pub fn run(a: Args) -> super::CmdResult {
    let spec = LevelSpec::get(a.level).ok_or(RunError::BadLevel(a.level))?;
    let ports = match &a.ports {
        Some(p) => parse_ports(p.as_bytes()).map_err(|reason| RunError::BadPorts {
            input: p.clone(),
            reason,
        })?,
        None => PortSet::EMPTY,
    };
    let program = PathBuf::from(&a.cmd[0]);
    let path = resolve(&program).ok_or_else(|| RunError::Program {
        program: program.display().to_string(),
        detail: "not found".into(),
    })?;
    let bytes = std::fs::read(&path).map_err(|e| RunError::Program {
        program: path.display().to_string(),
        detail: e.to_string(),
    })?;
    let kind = elf_kind(&bytes).map_err(|e| RunError::Program {
        program: path.display().to_string(),
        detail: e.to_string(),
    })?;
    drop(bytes);
    let ports_text = if ports.is_empty() {
        "all sockets".to_string()
    } else {
        let p: Vec<String> = ports.as_slice().iter().map(|p| p.to_string()).collect();
        format!("ports {}", p.join(","))
    };
    say(&format!(
        "level {} (DSCP {}, SO_PRIORITY {}), {ports_text}",
        spec.level, spec.dscp, spec.priority
    ));

    // Rate and pacing first: a refusal starts nothing.
    let mut rate = rate(&a, &spec)?;
    let mut pacing = None;
    if let Some(r) = &rate {
        say(&format!(
            "rate: f = {} packet{} of {} B per epoch {} = {} ({})",
            r.factor,
            if r.factor == 1 { "" } else { "s" },
            a.packet_bytes,
            fmt_ns(r.epoch_ns),
            fmt_rate(r.bps),
            r.source
        ));
        if a.no_pace {
            say("not paced (--no-pace)");
        } else {
            let dev = a
                .dev
                .clone()
                .or_else(default_interface)
                .ok_or(RunError::NoInterface)?;
            let link = xlane_testbed::config::parse_rate(&a.link_rate)
                .map_err(|e| RunError::BadRate(e.to_string()))?;
            let burst = r.factor as u64 * a.packet_bytes as u64;
            let p = Pacing::apply(&dev, &spec, r.bps, burst, link)?;
            say(&format!("paced: {}", p.describe()));
            pacing = Some(p);
        }
        say(&format!(
            "latency bound: {} (one network epoch 2nP/R, {}){}",
            fmt_ns(r.epoch_ns),
            if r.factor == 1 {
                "guaranteed while every host keeps its rate"
            } else {
                "statistical: holds while at most n/f hosts send to one destination"
            },
            r.tunnel_bound_ns
                .map(|b| format!("; the controller's tunnel bound {}", fmt_ns(b)))
                .unwrap_or_default()
        ));
    } else {
        say("level 0 is best effort: no rate, no bound");
    }

    // Marking.
    let mut cmd = Command::new(&path);
    cmd.args(&a.cmd[1..]);
    let mut classifier = None;
    let kind_name = match kind {
        ElfKind::Static => Some("static"),
        ElfKind::Go => Some("Go"),
        ElfKind::Dynamic | ElfKind::Script(_) => None,
    };
    if let Some(what) = kind_name {
        if ports.is_empty() {
            return Err(RunError::NeedsPorts(path.display().to_string(), what).into());
        }
        let tag = format!("xlane-run-{}", std::process::id());
        let c = PortClassifier::install(ports.as_slice(), &spec, &tag)?;
        say(&format!(
            "path: classifier ({} is a {what} binary; {})",
            path.display(),
            c.describe()
        ));
        classifier = Some(c);
    } else {
        let lib = library()?;
        let mut preload = lib.clone().into_os_string();
        if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
            preload.push(" ");
            preload.push(old);
        }
        cmd.env("LD_PRELOAD", preload)
            .env(ENV_TOS, spec.tos().to_string())
            .env(ENV_PRIORITY, spec.priority.to_string());
        if ports.is_empty() {
            cmd.env_remove(ENV_PORTS);
        } else {
            let p: Vec<String> = ports.as_slice().iter().map(|p| p.to_string()).collect();
            cmd.env(ENV_PORTS, p.join(","));
        }
        say(&format!("path: preload ({})", lib.display()));
    }

    if !a.cpus.is_empty() || a.nice.is_some() {
        say(&format!(
            "placement: CPUs {}, nice {}",
            if a.cpus.is_empty() {
                "inherited".to_string()
            } else {
                a.cpus
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            },
            a.nice.map_or("inherited".to_string(), |n| n.to_string())
        ));
    }
    let status = spawn_and_wait(cmd, &a.cpus, a.nice)?;
    drop(classifier);
    drop(pacing.take());
    // `exit` runs no destructors: release the tunnel first.
    drop(rate.take());
    std::process::exit(status);
}

/// Starts the program (killed if this process dies), passes SIGINT,
/// SIGTERM and SIGHUP on, and returns its exit code (128 + signal if a
/// signal ended it).
fn spawn_and_wait(mut cmd: Command, cpus: &[usize], nice: Option<i32>) -> Result<i32, RunError> {
    let online = xlane_host::runtime::online_cpus();
    if let Some(&c) = cpus
        .iter()
        .find(|&&c| c >= online.min(libc::CPU_SETSIZE as usize))
    {
        return Err(RunError::Spawn(format!(
            "--cpus {c}: this machine has CPUs 0..{online}"
        )));
    }
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET within its size.
    let mut cpu_set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: c < CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(c, &mut cpu_set) };
    }
    let pin = !cpus.is_empty();
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        set.add(s);
    }
    set.thread_block()
        .map_err(|e| RunError::Spawn(format!("block signals: {e}")))?;
    // SAFETY: prctl, sigprocmask, sched_setaffinity and setpriority are
    // async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(move || {
            if pin
                && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &cpu_set) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(n) = nice {
                if libc::setpriority(libc::PRIO_PROCESS, 0, n) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| RunError::Spawn(format!("cannot start the program: {e}")))?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| RunError::Spawn(e.to_string()))?
        {
            return Ok(st
                .code()
                .or_else(|| st.signal().map(|s| 128 + s))
                .unwrap_or(1));
        }
        match set.wait() {
            Ok(Signal::SIGCHLD) | Err(_) => {}
            Ok(sig) => {
                let _ = nix::sys::signal::kill(pid, sig);
            }
        }
    }
}
