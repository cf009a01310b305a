//! The four systems of `--workload redis-benchmark`, started as real
//! processes on loopback (root namespace, ports of their own), each
//! command line built in one function so that a flag changes in one place:
//! [`redis_args`], [`xlane_single_args`], [`xlane_member_args`].
//!
//! Every process is killed by its PID when its [`Servers`] drops (also on
//! failure and Ctrl-C) and its data directory removed.

use std::fs::File;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::kv_bench::systems::{children_alive, version_of, wait_ready};
use xlane_kv::resp::Reply;

use super::super::systems::which;
use super::super::wire::{info_field, Resp};
use super::RbSystem;

/// Loopback, where every server listens.
const LOOPBACK: [u8; 4] = [127, 0, 0, 1];

/// Client port of the lone Redis.
pub const REDIS_PORT: u16 = 16380;
/// Client port of the Redis primary with replicas; the replicas use the
/// next two.
pub const REDIS_WAIT_PORT: u16 = 16390;
/// Client port of the single xlane kv node.
pub const XLANE1_RESP_PORT: u16 = 16381;
/// Client port of xlane kv member 1 of 3 (members 2 and 3: the next two).
pub const XLANE3_RESP_PORT: u16 = 16383;
/// Raft port of member 1 of 3 (members 2 and 3: the next two).
pub const XLANE3_RAFT_PORT: u16 = 17383;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from((LOOPBACK, port))
}

/// `redis-server`'s arguments: AOF on with `appendfsync everysec`, no RDB
/// snapshots, data in `dir`; a replica of `replicaof` when given.
pub fn redis_args(port: u16, dir: &Path, replicaof: Option<u16>) -> Vec<String> {
    let mut a: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        "--loglevel",
        "warning",
        "--dir",
        &dir.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(p) = replicaof {
        a.extend(["--replicaof".into(), "127.0.0.1".into(), p.to_string()]);
    }
    a
}

/// `xlane`'s arguments for the single node (a one-member raft group),
/// its log in `dir` fsynced at most once a second (`--fsync everysec`,
/// Redis' `appendfsync everysec`).
pub fn xlane_single_args(resp: u16, dir: &Path) -> Vec<String> {
    vec![
        "kv".into(),
        "serve".into(),
        "--bind".into(),
        format!("127.0.0.1:{resp}"),
        "--data".into(),
        dir.display().to_string(),
        "--fsync".into(),
        "everysec".into(),
    ]
}

/// `xlane`'s arguments for member `id` (1-based) of a group whose members
/// are `peers` (raft port, client port), log in `dir` fsynced once per
/// at most once a second (`--fsync everysec`).
pub fn xlane_member_args(id: usize, peers: &[(u16, u16)], dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = vec!["kv".into(), "serve".into(), "--id".into(), id.to_string()];
    for (i, (raft, resp)) in peers.iter().enumerate() {
        a.push("--peer".into());
        a.push(format!("{}=127.0.0.1:{raft}/127.0.0.1:{resp}", i + 1));
    }
    a.extend([
        "--data".into(),
        dir.display().to_string(),
        "--fsync".into(),
        "everysec".into(),
    ]);
    a
}

/// One system's running processes.
pub struct Servers {
    /// Which system.
    pub system: RbSystem,
    /// Where its clients connect (Redis: the primary; xlane-3: the leader).
    pub client: SocketAddr,
    /// Every process's client address, the leader's (primary's) first.
    pub members: Vec<SocketAddr>,
    /// Version of the server binary.
    pub version: String,
    /// The command lines started, for the report.
    pub command_lines: Vec<String>,
    children: Vec<Child>,
    dir: PathBuf,
}

impl Drop for Servers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An error unless `port` is free on loopback for TCP (and UDP with `udp`).
fn check_free(port: u16, udp: bool) -> Result<(), String> {
    TcpListener::bind(addr(port)).map_err(|e| format!("port {port} is not free: {e}"))?;
    if udp {
        UdpSocket::bind(addr(port)).map_err(|e| format!("UDP port {port} is not free: {e}"))?;
    }
    Ok(())
}

impl Servers {
    /// Starts `system` with its data under `dir` (created; removed when
    /// stopped) and waits until it takes writes (Redis with replicas: both
    /// replicas' links up; xlane-3: a leader took a write).
    pub fn start(
        system: RbSystem,
        dir: PathBuf,
        xlane_bin: Option<&Path>,
        timeout: Duration,
    ) -> Result<Servers, String> {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut s = Servers {
            system,
            client: addr(0),
            members: Vec::new(),
            version: String::new(),
            command_lines: Vec::new(),
            children: Vec::new(),
            dir,
        };
        let r = match system {
            RbSystem::Redis => s.start_redis(REDIS_PORT, 0, timeout),
            RbSystem::RedisWait => s.start_redis(REDIS_WAIT_PORT, 2, timeout),
            RbSystem::Xlane1 => s.start_xlane1(xlane_bin, timeout),
            RbSystem::Xlane3 => s.start_xlane3(xlane_bin, timeout),
        };
        r.map_err(|e| format!("{e}{}", s.logs_tail()))?;
        Ok(s)
    }

    fn spawn(&mut self, name: &str, bin: &Path, args: &[String]) -> Result<(), String> {
        let log = self.dir.join(format!("{name}.log"));
        let out = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        self.command_lines
            .push(format!("{} {}", bin.display(), shell_words(args)));
        self.children.push(child);
        Ok(())
    }

    /// The last lines of every log, for an error.
    pub fn logs_tail(&self) -> String {
        let mut s = String::new();
        for e in std::fs::read_dir(&self.dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "log") {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
                if !tail.is_empty() {
                    s.push_str(&format!("; {}: {tail}", p.display()));
                }
            }
        }
        s
    }

    /// An error if a process exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        children_alive(&mut self.children)
    }

    fn wait_until(
        &mut self,
        timeout: Duration,
        what: &str,
        ready: impl FnMut(&mut Servers) -> Result<bool, String>,
    ) -> Result<(), String> {
        wait_ready(self, timeout, what, Servers::check_alive, ready)
    }

    fn start_redis(&mut self, port: u16, replicas: u16, timeout: Duration) -> Result<(), String> {
        let bin = which("redis-server").ok_or("redis-server not found")?;
        self.version = version_of(&bin, "--version");
        for i in 0..=replicas {
            check_free(port + i, false)?;
        }
        for i in 0..=replicas {
            let d = self.dir.join(format!("r{i}"));
            std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
            let args = redis_args(port + i, &d, (i > 0).then_some(port));
            self.spawn(&format!("redis{i}"), &bin, &args)?;
            self.members.push(addr(port + i));
        }
        self.client = addr(port);
        let want = replicas.to_string();
        self.wait_until(timeout, "Redis", |s| {
            let mut c = Resp::connect(s.client, Duration::from_secs(1))?;
            let info = c.info("replication")?;
            if info_field(&info, "connected_slaves") != Some(want.as_str()) {
                return Ok(false);
            }
            for &m in &s.members[1..] {
                let info = Resp::connect(m, Duration::from_secs(1))?.info("replication")?;
                if info_field(&info, "master_link_status") != Some("up") {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }

    fn start_xlane1(&mut self, bin: Option<&Path>, timeout: Duration) -> Result<(), String> {
        let bin = bin.ok_or("no xlane binary given")?.to_path_buf();
        self.version = format!("xlane {}", env!("CARGO_PKG_VERSION"));
        check_free(XLANE1_RESP_PORT, false)?;
        let d = self.dir.join("x1");
        let args = xlane_single_args(XLANE1_RESP_PORT, &d);
        self.spawn("xlane1", &bin, &args)?;
        self.client = addr(XLANE1_RESP_PORT);
        self.members = vec![self.client];
        self.wait_until(timeout, "xlane kv", |s| {
            let mut c = Resp::connect(s.client, Duration::from_secs(1))?;
            Ok(c.cmd(&[b"SET", b"rbench:probe", b"1"])? == Reply::ok())
        })
    }

    fn start_xlane3(&mut self, bin: Option<&Path>, timeout: Duration) -> Result<(), String> {
        let bin = bin.ok_or("no xlane binary given")?.to_path_buf();
        self.version = format!("xlane {}", env!("CARGO_PKG_VERSION"));
        let peers: Vec<(u16, u16)> = (0..3)
            .map(|i| (XLANE3_RAFT_PORT + i, XLANE3_RESP_PORT + i))
            .collect();
        for &(raft, resp) in &peers {
            check_free(resp, false)?;
            check_free(raft, true)?;
        }
        for id in 1..=3 {
            let d = self.dir.join(format!("x{id}"));
            let args = xlane_member_args(id, &peers, &d);
            self.spawn(&format!("xlane{id}"), &bin, &args)?;
        }
        let all: Vec<SocketAddr> = peers.iter().map(|&(_, resp)| addr(resp)).collect();
        // The member that takes a write is the leader (followers answer
        // -MOVED); it goes first.
        self.wait_until(timeout, "an xlane kv leader", |s| {
            for (i, &a) in all.iter().enumerate() {
                let Ok(mut c) = Resp::connect(a, Duration::from_secs(1)) else {
                    continue;
                };
                if c.cmd(&[b"SET", b"rbench:probe", b"1"])? == Reply::ok() {
                    s.client = a;
                    s.members = all.clone();
                    s.members.swap(0, i);
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    /// Empties the data set (`FLUSHALL`; with replicas, then `WAIT` for
    /// them) so that every run starts from the same state.
    pub fn flush(&mut self) -> Result<(), String> {
        self.check_alive()?;
        let mut c = Resp::connect(self.client, Duration::from_secs(10))?;
        match c.cmd(&[b"FLUSHALL"])? {
            Reply::Error(e) => return Err(format!("FLUSHALL: {e}")),
            _ if self.system == RbSystem::RedisWait => {
                if let Reply::Error(e) = c.cmd(&[b"WAIT", b"2", b"10000"])? {
                    return Err(format!("WAIT: {e}"));
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Arguments as a shell would need them (empty ones quoted).
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() {
                "''".to_string()
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
