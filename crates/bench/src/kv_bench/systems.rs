//! Starting the compared systems as real processes, one member per testbed
//! host (`ip netns exec`), finding their leader, and reading what says
//! whether the leader changed.
//!
//! Placement: the members of xlane kv over the lane run on the lane core
//! (`taskset -c <lane> nice -n` [`MEMBER_NICE`]): the lane core is theirs,
//! and nice keeps them ahead of the writer and observers that share it.
//! They are whole services (clients, raft log, replication on one thread),
//! not bounded lane loops, so they stay in the fair class: at SCHED_FIFO a
//! member saturated by a throughput phase would starve the others on the
//! core, or be throttled for 50 ms of a second, and X-FD would depose the
//! leader. Every other member inherits the bench's affinity (the regular
//! cores) and the default policy and priority. Every process is
//! killed by its PID when its cluster is dropped, also on failure, and its
//! data directory removed.

use std::fmt::Write as _;
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use xlane_kv::resp::Reply;
use xlane_testbed::in_netns;

use super::wire::{base64, info_field, Http, Resp};
use super::System;

/// Nice value of the lane's kv members on the lane core.
pub const MEMBER_NICE: i32 = -10;
/// X-FD's Λ of the lane's kv members, µs (see where it is passed).
pub const LANE_LAMBDA_US: u64 = 100_000;

/// Client port of every Redis member.
pub const RESP_PORT: u16 = 6380;
/// Client port of an xlane kv member over UDP (one port per system: the
/// bench runs the compared clusters side by side in the same hosts).
pub const XLANE_RESP_PORT: u16 = 6381;
/// Client port of an xlane kv member over the lane.
pub const XLANE_LANE_RESP_PORT: u16 = 6382;
/// Raft port of an xlane kv member over UDP.
pub const RAFT_PORT: u16 = 7001;
/// Raft port of an xlane kv member over the lane (which also uses the next
/// one, for X-FD).
pub const LANE_RAFT_PORT: u16 = 7011;

/// The client port of `system`'s members (etcd: its client port).
pub fn client_port(system: System) -> u16 {
    match system {
        System::Redis => RESP_PORT,
        System::Xlane => XLANE_RESP_PORT,
        System::XlaneLane => XLANE_LANE_RESP_PORT,
        System::Etcd => ETCD_CLIENT_PORT,
    }
}
/// etcd's client port.
pub const ETCD_CLIENT_PORT: u16 = 2379;
/// etcd's peer port.
pub const ETCD_PEER_PORT: u16 = 2380;

/// One member's host in the testbed.
#[derive(Clone, Debug)]
pub struct Host {
    /// Its network namespace.
    pub netns: String,
    /// Its address.
    pub addr: Ipv4Addr,
}

/// Runs `f` on this thread inside `host`'s namespace (sockets it makes
/// stay there).
pub fn in_host<T>(host: &Host, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    in_netns(&host.netns, f).map_err(|e| format!("enter {}: {e}", host.netns))?
}

/// A running cluster: its processes, hosts and client addresses.
pub struct Cluster {
    /// Which system.
    pub system: System,
    /// Member `i` runs in `hosts[i]`.
    pub hosts: Vec<Host>,
    /// Client address of every member (in its own host).
    pub clients: Vec<SocketAddr>,
    /// Index of the leader (Redis: the primary).
    pub leader: usize,
    /// Version of the server binary.
    pub version: String,
    children: Vec<Child>,
    dir: PathBuf,
    /// Per member: a command the server runs under (such as `xlane run
    /// ...`); empty: none.
    wrap: Vec<Vec<String>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A wrapper (`xlane run`) gets SIGTERM first, so that it passes it
        // on and undoes what it set up; whatever is left is killed.
        if self.wrap.iter().any(|w| !w.is_empty()) {
            for c in &self.children {
                // SAFETY: kill on a child's PID that we have not waited for.
                unsafe {
                    libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
                }
            }
            let deadline = Instant::now() + Duration::from_secs(3);
            for c in &mut self.children {
                while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What starting a cluster needs.
pub struct Start<'a> {
    /// The hosts, one per member.
    pub hosts: &'a [Host],
    /// A fresh directory for the data and logs (removed afterwards).
    pub dir: PathBuf,
    /// The lane core (for the lane's members).
    pub lane_core: usize,
    /// The xlane binary.
    pub xlane_bin: Option<&'a Path>,
    /// How long the cluster may take to come up.
    pub timeout: Duration,
    /// Per member: a command to run the server under (for example `xlane
    /// run --level 2 ... --`); missing or empty: none.
    pub wrap: Vec<Vec<String>>,
}

/// Spawns `ip netns exec <host's namespace> <prefix...> program args`, with
/// its standard output and error in `log` and no standard input.
pub fn spawn_in(
    host: &Host,
    prefix: &[String],
    program: &Path,
    args: &[String],
    log: &Path,
) -> Result<Child, String> {
    let out = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    Command::new("ip")
        .args(["netns", "exec", &host.netns])
        .args(prefix)
        .arg(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))
}

/// Where a binary is, on `PATH` or in `/usr/sbin`, `/usr/bin`.
pub fn which(bin: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(bin))
        .find(|p| p.is_file())
}

/// The first line `bin arg` prints (its version), or empty.
pub(crate) fn version_of(bin: &Path, arg: &str) -> String {
    Command::new(bin)
        .arg(arg)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
        .unwrap_or_default()
}

impl Cluster {
    /// Starts `system` on `s.hosts` and waits until it serves writes and
    /// every member has one.
    pub fn start(system: System, s: &Start) -> Result<Cluster, String> {
        std::fs::create_dir_all(&s.dir).map_err(|e| format!("{}: {e}", s.dir.display()))?;
        let mut cl = Cluster {
            system,
            hosts: s.hosts.to_vec(),
            clients: Vec::new(),
            leader: 0,
            version: String::new(),
            children: Vec::new(),
            dir: s.dir.clone(),
            wrap: s.wrap.clone(),
        };
        let r = match system {
            System::Redis => cl.start_redis(s),
            System::Etcd => cl.start_etcd(s),
            System::Xlane | System::XlaneLane => cl.start_xlane(s),
        };
        match r {
            Ok(()) => Ok(cl),
            Err(e) => Err(format!("{e}{}", cl.logs_tail())),
        }
    }

    /// Every member's RESP address (Redis, xlane kv).
    fn resp_addrs(&self) -> Vec<SocketAddr> {
        self.hosts
            .iter()
            .map(|h| SocketAddr::V4(SocketAddrV4::new(h.addr, client_port(self.system))))
            .collect()
    }

    /// Spawns `program args` in host `h`'s namespace, on the lane core at
    /// nice [`MEMBER_NICE`] when `lane_core` is given.
    fn spawn(
        &mut self,
        name: &str,
        h: usize,
        lane_core: Option<usize>,
        program: &Path,
        args: &[String],
    ) -> Result<(), String> {
        let mut prefix: Vec<String> = Vec::new();
        if let Some(core) = lane_core {
            prefix.extend(["taskset".into(), "-c".into(), core.to_string()]);
            prefix.extend(["nice".into(), "-n".into(), MEMBER_NICE.to_string()]);
        }
        if let Some(w) = self.wrap.get(h) {
            prefix.extend(w.iter().cloned());
        }
        let log = self.dir.join(format!("{name}.log"));
        let child = spawn_in(&self.hosts[h], &prefix, program, args, &log)?;
        self.children.push(child);
        Ok(())
    }

    /// The lines of member log `name` (`etcd0`, `redis1`, ...) that contain
    /// `needle`.
    pub fn log_lines(&self, name: &str, needle: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(format!("{name}.log")))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    /// The last lines of every log, for an error.
    pub fn logs_tail(&self) -> String {
        let mut s = String::new();
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "log") {
                    let text = std::fs::read_to_string(&p).unwrap_or_default();
                    let lines: Vec<&str> = text.lines().collect();
                    let tail = lines[lines.len().saturating_sub(3)..].join(" | ");
                    if !tail.is_empty() {
                        let _ = write!(s, "; {}: {tail}", p.display());
                    }
                }
            }
        }
        s
    }

    /// An error if a member exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        children_alive(&mut self.children)
    }

    /// A RESP connection to member `i`, made in its host.
    pub fn resp(&self, i: usize, timeout: Duration) -> Result<Resp, String> {
        let a = self.clients[i];
        in_host(&self.hosts[i], || Resp::connect(a, timeout))
    }

    /// An HTTP connection to member `i`, made in its host.
    pub fn http(&self, i: usize, timeout: Duration) -> Result<Http, String> {
        let a = self.clients[i];
        in_host(&self.hosts[i], || Http::connect(a, timeout))
    }

    fn wait_until(
        &mut self,
        timeout: Duration,
        what: &str,
        ready: impl FnMut(&mut Cluster) -> Result<bool, String>,
    ) -> Result<(), String> {
        wait_ready(self, timeout, what, Cluster::check_alive, ready)
    }

    fn start_redis(&mut self, s: &Start) -> Result<(), String> {
        let bin = which("redis-server").ok_or("redis-server not found")?;
        self.version = version_of(&bin, "--version");
        let primary = self.hosts[0].addr;
        for i in 0..self.hosts.len() {
            let dir = self.dir.join(format!("r{i}"));
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            let mut args: Vec<String> = [
                "--port",
                &RESP_PORT.to_string(),
                "--bind",
                &self.hosts[i].addr.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "no",
                "--daemonize",
                "no",
                "--loglevel",
                "warning",
                "--dir",
            ]
            .iter()
            .map(|x| x.to_string())
            .collect();
            args.push(dir.display().to_string());
            if i > 0 {
                args.extend([
                    "--replicaof".into(),
                    primary.to_string(),
                    RESP_PORT.to_string(),
                ]);
            }
            self.spawn(&format!("redis{i}"), i, None, &bin, &args)?;
        }
        self.clients = self.resp_addrs();
        let n = self.hosts.len();
        // Every replica's link is up and the primary counts them all.
        self.wait_until(s.timeout, "Redis replication", |cl| {
            for i in 0..n {
                let info = cl.resp(i, Duration::from_secs(1))?.info("replication")?;
                let ok = if i == 0 {
                    // i = 0 < n: n ≥ 1.
                    info_field(&info, "connected_slaves") == Some(&(n - 1).to_string())
                } else {
                    info_field(&info, "master_link_status") == Some("up")
                };
                if !ok {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }

    fn start_etcd(&mut self, s: &Start) -> Result<(), String> {
        let bin = which("etcd").ok_or("etcd not found")?;
        self.version = version_of(&bin, "--version");
        let initial: Vec<String> = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| format!("n{i}=http://{}:{ETCD_PEER_PORT}", h.addr))
            .collect();
        let token = format!("kvbench-{}", std::process::id());
        for i in 0..self.hosts.len() {
            let a = self.hosts[i].addr;
            let c = format!("http://{a}:{ETCD_CLIENT_PORT}");
            let p = format!("http://{a}:{ETCD_PEER_PORT}");
            let args: Vec<String> = [
                "--name",
                &format!("n{i}"),
                "--data-dir",
                &self.dir.join(format!("e{i}")).display().to_string(),
                "--listen-client-urls",
                &c,
                "--advertise-client-urls",
                &c,
                "--listen-peer-urls",
                &p,
                "--initial-advertise-peer-urls",
                &p,
                "--initial-cluster",
                &initial.join(","),
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                &token,
                "--logger",
                "zap",
                "--log-level",
                "error",
            ]
            .iter()
            .map(|x| x.to_string())
            .collect();
            self.spawn(&format!("etcd{i}"), i, None, &bin, &args)?;
        }
        self.clients = self
            .hosts
            .iter()
            .map(|h| SocketAddr::V4(SocketAddrV4::new(h.addr, ETCD_CLIENT_PORT)))
            .collect();
        // Every member knows the leader, and a write goes through it.
        self.wait_until(s.timeout, "an etcd leader", |cl| {
            let st = etcd_status(cl)?;
            let Some(l) = st.leader else {
                return Ok(false);
            };
            cl.leader = l;
            let body = format!(
                "{{\"key\":\"{}\",\"value\":\"{}\"}}",
                base64(b"kvbench:probe"),
                base64(b"1")
            );
            cl.http(l, Duration::from_secs(2))?
                .post("/v3/kv/put", &body)
                .map(|_| true)
        })
    }

    fn start_xlane(&mut self, s: &Start) -> Result<(), String> {
        let bin = s.xlane_bin.ok_or("no xlane binary given")?.to_path_buf();
        self.version = format!("xlane {}", env!("CARGO_PKG_VERSION"));
        let lane = self.system == System::XlaneLane;
        let raft_port = if lane { LANE_RAFT_PORT } else { RAFT_PORT };
        let resp_port = client_port(self.system);
        let peers: Vec<String> = self
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| format!("{}={}:{raft_port}/{}:{resp_port}", i + 1, h.addr, h.addr))
            .collect();
        for i in 0..self.hosts.len() {
            let mut args: Vec<String> = vec!["kv".into(), "serve".into(), "--id".into()];
            args.push((i + 1).to_string());
            for p in &peers {
                args.extend(["--peer".into(), p.clone()]);
            }
            args.extend([
                "--data".into(),
                self.dir.join(format!("x{}", i + 1)).display().to_string(),
                "--fsync".into(),
                "never".into(),
            ]);
            if lane {
                args.extend(["--transport".into(), "lane".into()]);
                // Every member shares the one lane core here, so a busy
                // member waits for the others' time slices (tens of ms
                // when a throughput phase keeps them all busy); Λ covers
                // that, as `--fd-lambda-us` asks (a real member has a core
                // of its own). Still below Raft's election timeout over UDP.
                args.extend(["--fd-lambda-us".into(), LANE_LAMBDA_US.to_string()]);
            }
            let core = lane.then_some(s.lane_core);
            self.spawn(&format!("xlane{}", i + 1), i, core, &bin, &args)?;
        }
        self.clients = self.resp_addrs();
        let n = self.hosts.len();
        // A member takes a write (followers answer -MOVED), and every
        // member has applied it.
        self.wait_until(s.timeout, "an xlane kv leader", |cl| {
            let mut leader = None;
            for i in 0..n {
                let Ok(mut c) = cl.resp(i, Duration::from_secs(1)) else {
                    continue;
                };
                if c.cmd(&[b"SET", b"kvbench:probe", b"1"])? == Reply::ok() {
                    leader = Some(i);
                    break;
                }
            }
            let Some(l) = leader else {
                return Ok(false);
            };
            cl.leader = l;
            for i in 0..n {
                let mut c = cl.resp(i, Duration::from_secs(1))?;
                c.push(&[b"READONLY"]);
                c.push(&[b"GET", b"kvbench:probe"]);
                c.flush()?;
                let _ = c.reply()?;
                if c.reply()? != Reply::bulk("1") {
                    return Ok(false);
                }
            }
            Ok(true)
        })
    }

    /// What tells afterwards whether the leader changed (see
    /// [`LeaderState::changes_since`]).
    pub fn leader_state(&self) -> Result<LeaderState, String> {
        let t = Duration::from_secs(5);
        match self.system {
            System::Etcd => Ok(LeaderState::Term(etcd_status(self)?.term)),
            System::Xlane | System::XlaneLane => {
                let mut term = 0;
                for i in 0..self.clients.len() {
                    let info = self.resp(i, t)?.info("stats")?;
                    let v = info_field(&info, "xlane_leader_term")
                        .and_then(|v| v.parse::<u64>().ok())
                        .ok_or("INFO has no xlane_leader_term")?;
                    term = term.max(v);
                }
                Ok(LeaderState::Term(term))
            }
            System::Redis => {
                let mut roles = Vec::new();
                for i in 0..self.clients.len() {
                    let info = self.resp(i, t)?.info("replication")?;
                    roles.push(info_field(&info, "role").unwrap_or("?").to_string());
                }
                Ok(LeaderState::Roles(roles))
            }
        }
    }
}

/// The leadership of a cluster at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderState {
    /// The highest raft term any member reports (etcd: `raftTerm` of the
    /// maintenance status; xlane kv: `xlane_leader_term` of INFO).
    Term(u64),
    /// Each member's replication role (Redis).
    Roles(Vec<String>),
}

impl LeaderState {
    /// Leader changes from `before` to `self`: terms begun, or members
    /// whose role changed. A highest term that went back (a member lost
    /// its raft state) is an error: no count of changes would be true.
    pub fn changes_since(&self, before: &LeaderState) -> Result<u64, String> {
        match (before, self) {
            (LeaderState::Term(a), LeaderState::Term(b)) => b.checked_sub(*a).ok_or_else(|| {
                format!("the highest raft term went back from {a} to {b}: a member lost its state")
            }),
            (LeaderState::Roles(a), LeaderState::Roles(b)) => {
                Ok(a.iter().zip(b).filter(|(x, y)| x != y).count() as u64)
            }
            _ => Ok(0),
        }
    }
}

struct EtcdStatus {
    leader: Option<usize>,
    term: u64,
}

/// Every member's maintenance status: the leader (when all members agree
/// there is one) and the highest raft term.
fn etcd_status(cl: &Cluster) -> Result<EtcdStatus, String> {
    let mut leader = None;
    let mut all_know = true;
    let mut term = 0;
    for i in 0..cl.clients.len() {
        let v = cl
            .http(i, Duration::from_secs(2))?
            .post("/v3/maintenance/status", "{}")?;
        let me = v["header"]["member_id"].as_str().unwrap_or("");
        let l = v["leader"].as_str().unwrap_or("0");
        term = term.max(
            v["raftTerm"]
                .as_str()
                .and_then(|t| t.parse::<u64>().ok())
                .unwrap_or(0),
        );
        if l == "0" || l.is_empty() {
            all_know = false;
        } else if me == l {
            leader = Some(i);
        }
    }
    Ok(EtcdStatus {
        leader: leader.filter(|_| all_know),
        term,
    })
}

/// An error naming the first of `children` that exited.
pub(crate) fn children_alive(children: &mut [std::process::Child]) -> Result<(), String> {
    for c in children {
        if let Ok(Some(st)) = c.try_wait() {
            return Err(format!("process {} exited ({st})", c.id()));
        }
    }
    Ok(())
}

/// Polls `ready` every 50 ms until it says yes; fails when `alive` fails
/// (a process exited) or after `timeout`, with `ready`'s last error.
pub(crate) fn wait_ready<T>(
    fleet: &mut T,
    timeout: Duration,
    what: &str,
    alive: fn(&mut T) -> Result<(), String>,
    mut ready: impl FnMut(&mut T) -> Result<bool, String>,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        alive(fleet)?;
        match ready(fleet) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = e,
        }
        if Instant::now() > deadline {
            return Err(format!("{what} not in time (last: {last})"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_changes_count_terms_and_roles() {
        let t = |n| LeaderState::Term(n);
        let r = |v: &[&str]| LeaderState::Roles(v.iter().map(|s| s.to_string()).collect());
        // None: the term went back, an error.
        let table = [
            (t(2), t(2), Some(0)),
            (t(2), t(5), Some(3)),
            (t(5), t(2), None),
            (r(&["master", "slave"]), r(&["master", "slave"]), Some(0)),
            (r(&["master", "slave"]), r(&["slave", "master"]), Some(2)),
            (t(1), r(&["master"]), Some(0)),
        ];
        for (before, after, want) in table {
            let got = after.changes_since(&before);
            assert_eq!(got.clone().ok(), want, "{before:?} → {after:?}: {got:?}");
        }
    }
}
