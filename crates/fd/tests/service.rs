//! End to end: three X-FD runners (separate processes), each with a
//! stand-in application bumping its liveness counter, watched through the
//! shared alive tables.
//!
//! 1. all alive → joined, no suspicion;
//! 2. `kill -9` one runner (by its PID) → the others suspect it (silent),
//!    and not before `T + Λ` of silence;
//! 3. `SIGSTOP` one application → its peers suspect it (stalled) while its
//!    host keeps sending; `SIGCONT` → recovered.
//!
//! Run on loopback (unicast, sender replication) always, and in a 3-host
//! testbed (network namespaces, IP multicast) when root. The test binary
//! is its own child: `--xlane-fd-child run|bump key=value...`.
//!
//! No absolute time is asserted: waits have a generous failure timeout.

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use xlane_fd::service::{bump_loop, RunConfig, Service};
use xlane_fd::{
    AliveTable, EventCursor, EventItem, EventKind, LivenessCounter, PeerSpec, Reason, Status,
};
use xlane_host::runtime::Placement;
use xlane_host::socket::realtime_ns;
use xlane_host::tuning::install_termination_flag;

const CHILD_FLAG: &str = "--xlane-fd-child";
const PERIOD_NS: u64 = 5_000_000;
const LAMBDA_NS: u64 = 200_000_000;
const STALL: u32 = 40;
const WAIT: Duration = Duration::from_secs(30);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some(CHILD_FLAG) {
        child(&args[2..]);
        return;
    }
    let root = is_root();
    let t = Instant::now();
    scenario(&Net::Loopback);
    eprintln!("loopback scenario passed in {:.1?}", t.elapsed());
    if root {
        let t = Instant::now();
        let tb = xlane_testbed::Testbed::up(xlane_testbed::TestbedConfig {
            hosts: 3,
            measure_probes: 0,
            ..Default::default()
        })
        .expect("testbed up");
        let hosts = tb.hosts().to_vec();
        scenario(&Net::Testbed(hosts));
        tb.down().expect("testbed down");
        eprintln!("testbed scenario passed in {:.1?}", t.elapsed());
    } else {
        eprintln!("testbed scenario skipped: needs root");
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

enum Net {
    Loopback,
    Testbed(Vec<xlane_testbed::HostInfo>),
}

// ------------------------------------------------------------ children

fn kv(args: &[String]) -> HashMap<&str, &str> {
    args.iter().filter_map(|a| a.split_once('=')).collect()
}

fn child(args: &[String]) {
    let role = args.first().map(String::as_str).unwrap_or("");
    let kv = kv(args);
    let get = |k: &str| -> &str {
        kv.get(k)
            .copied()
            .unwrap_or_else(|| panic!("child needs {k}="))
    };
    let fifo = get("fifo").parse::<i32>().expect("fifo");
    let placement = Placement {
        core: None,
        fifo: (fifo > 0).then_some(fifo),
    };
    let stop = install_termination_flag();
    match role {
        "run" => {
            let peers = get("peers")
                .split(',')
                .map(|p| PeerSpec::parse(p, 253).expect("peer"))
                .collect();
            let cfg = RunConfig {
                group: kv.get("group").map(|g| g.parse().expect("group")),
                stall_periods: Some(STALL),
                counter: Some(PathBuf::from(get("counter"))),
                placement,
                ..RunConfig::new(
                    get("addr").parse().expect("addr"),
                    253,
                    peers,
                    PERIOD_NS,
                    LAMBDA_NS,
                    PathBuf::from(get("table")),
                )
            };
            let svc = Service::start(cfg).expect("start");
            svc.run(stop, &mut |_| {}).expect("run");
        }
        "bump" => {
            xlane_host::runtime::place_current_thread(placement).expect("placement");
            let c = LivenessCounter::open_or_create(get("counter")).expect("counter");
            bump_loop(&c, PERIOD_NS / 3, stop, u64::MAX);
        }
        r => panic!("unknown child role {r:?}"),
    }
}

/// Child processes, killed (by PID) and reaped on drop.
struct Procs(Vec<Child>);

impl Procs {
    fn spawn(&mut self, netns: Option<&str>, args: &[String]) -> u32 {
        let exe = std::env::current_exe().expect("current exe");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let child = cmd
            .arg(CHILD_FLAG)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn child");
        let pid = child.id();
        self.0.push(child);
        pid
    }

    fn signal(&self, pid: u32, sig: libc::c_int) {
        assert!(self.0.iter().any(|c| c.id() == pid), "not our child");
        // SAFETY: signalling a child we started, by its PID.
        let r = unsafe { libc::kill(pid as libc::pid_t, sig) };
        assert_eq!(r, 0, "kill({pid}, {sig})");
    }

    fn reap(&mut self, pid: u32) {
        if let Some(c) = self.0.iter_mut().find(|c| c.id() == pid) {
            let _ = c.wait();
        }
    }
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            if let Ok(None) = c.try_wait() {
                // SAFETY: our own child, by PID. SIGCONT first in case it is stopped.
                unsafe {
                    libc::kill(c.id() as libc::pid_t, libc::SIGCONT);
                    libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
                }
            }
        }
        let t = Instant::now();
        for c in &mut self.0 {
            while let Ok(None) = c.try_wait() {
                if t.elapsed() > Duration::from_secs(5) {
                    let _ = c.kill();
                    let _ = c.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ------------------------------------------------------------ scenario

/// A table being watched: its reader and an event cursor from the start.
struct Watch {
    table: AliveTable,
    cursor: EventCursor,
    seen: Vec<xlane_fd::Event>,
}

impl Watch {
    fn open(path: &Path, pid: u32) -> Watch {
        let table = wait_for("the runner's table", || {
            AliveTable::open(path)
                .ok()
                .filter(|t| t.info().writer_pid == pid)
        });
        let cursor = table.subscribe_from(0);
        Watch {
            table,
            cursor,
            seen: vec![],
        }
    }

    /// Reads new events; returns those of `addr` with `kind` seen so far.
    fn poll(&mut self) {
        while let Some(item) = self.cursor.next_item(&self.table) {
            match item {
                EventItem::Event(e) => self.seen.push(e),
                EventItem::Missed(n) => panic!("missed {n} events"),
            }
        }
    }

    fn has(&mut self, addr: SocketAddrV4, kind: EventKind) -> Option<xlane_fd::Event> {
        self.poll();
        self.seen
            .iter()
            .find(|e| e.addr == addr && e.kind == kind)
            .copied()
    }

    fn suspicions(&mut self) -> Vec<xlane_fd::Event> {
        self.poll();
        self.seen
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Suspected(_)))
            .copied()
            .collect()
    }

    fn status(&self, addr: SocketAddrV4) -> Option<Status> {
        self.table.find(addr).map(|p| p.status)
    }
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn scenario(net: &Net) {
    let dir = TempDir(std::env::temp_dir().join(format!(
        "xlane-fd-it-{}-{}",
        std::process::id(),
        realtime_ns()
    )));
    std::fs::create_dir_all(&dir.0).expect("mkdir");
    let fifo = if is_root() { "20" } else { "0" };
    // (heartbeat address, netns)
    let hosts: Vec<(SocketAddrV4, Option<String>)> = match net {
        Net::Loopback => {
            // Ports from this process's PID so parallel runs do not collide.
            let base = 20_000 + (std::process::id() % 2_000) as u16 * 10;
            (0..3)
                .map(|i| (SocketAddrV4::new([127, 0, 0, 1].into(), base + i), None))
                .collect()
        }
        Net::Testbed(hs) => hs
            .iter()
            .map(|h| (SocketAddrV4::new(h.addr, 47_000), Some(h.netns.clone())))
            .collect(),
    };
    let group = match net {
        Net::Loopback => None,
        Net::Testbed(_) => Some("239.255.70.1:47000"),
    };
    let peer_list = hosts
        .iter()
        .map(|h| h.0.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut procs = Procs(vec![]);
    let mut apps = vec![];
    let mut runners = vec![];
    for (i, (addr, ns)) in hosts.iter().enumerate() {
        let counter = dir.0.join(format!("h{i}.counter"));
        let table = dir.0.join(format!("h{i}.table"));
        apps.push(procs.spawn(
            None,
            &[
                "bump".into(),
                format!("counter={}", counter.display()),
                format!("fifo={fifo}"),
            ],
        ));
        let mut args = vec![
            "run".to_string(),
            format!("addr={addr}"),
            format!("peers={peer_list}"),
            format!("counter={}", counter.display()),
            format!("table={}", table.display()),
            format!("fifo={fifo}"),
        ];
        if let Some(g) = group {
            args.push(format!("group={g}"));
        }
        let pid = procs.spawn(ns.as_deref(), &args);
        runners.push((pid, table, *addr));
    }
    let mut watches: Vec<Watch> = runners
        .iter()
        .map(|(pid, table, _)| Watch::open(table, *pid))
        .collect();

    // 1. Everyone joins everyone; nobody is suspected.
    for (i, w) in watches.iter_mut().enumerate() {
        for (j, (_, _, addr)) in runners.iter().enumerate() {
            if i != j {
                wait_for("a join", || w.has(*addr, EventKind::Joined));
            }
        }
    }
    std::thread::sleep(Duration::from_millis(1000));
    for (i, w) in watches.iter_mut().enumerate() {
        assert_eq!(
            w.suspicions(),
            vec![],
            "host {i} suspected someone while all were alive"
        );
        for (j, (_, _, addr)) in runners.iter().enumerate() {
            if i != j {
                assert_eq!(w.status(*addr), Some(Status::Alive), "{i} → {j}");
                let p = w.table.find(*addr).expect("entry");
                assert!(p.counter.is_some_and(|c| c > 0), "{p:?}");
            }
        }
    }

    // 2. kill -9 runner 2: hosts 0 and 1 suspect it, silent.
    let (victim, _, victim_addr) = runners[2].clone();
    procs.signal(victim, libc::SIGKILL);
    procs.reap(victim);
    for w in &mut watches[..2] {
        let e = wait_for("suspicion of the killed runner", || {
            w.has(victim_addr, EventKind::Suspected(Reason::Silent))
        });
        let p = w.table.find(victim_addr).expect("entry");
        assert_eq!(p.status, Status::Suspected(Reason::Silent));
        // Not before T + Λ of silence (a property of the detector, not a timing bound).
        let last = p.last_rx_ns.expect("heard before");
        assert!(
            e.at_ns - last > PERIOD_NS + LAMBDA_NS,
            "suspected after {} ns of silence",
            e.at_ns - last
        );
    }

    // 3. SIGSTOP application 1: its host keeps sending, the counter stops.
    let app1 = apps[1];
    let addr1 = runners[1].2;
    procs.signal(app1, libc::SIGSTOP);
    let w0 = &mut watches[0];
    wait_for("stalled suspicion", || {
        w0.has(addr1, EventKind::Suspected(Reason::Stalled))
    });
    assert_eq!(w0.status(addr1), Some(Status::Suspected(Reason::Stalled)));
    // The host itself was never silent.
    assert_eq!(
        w0.has(addr1, EventKind::Suspected(Reason::Silent)),
        None,
        "host 1 was suspected silent"
    );
    procs.signal(app1, libc::SIGCONT);
    wait_for("recovery", || w0.has(addr1, EventKind::Recovered));
    assert_eq!(w0.status(addr1), Some(Status::Alive));
    // Host 0 still suspects nobody else but the killed runner.
    let others: Vec<_> = w0
        .suspicions()
        .into_iter()
        .filter(|e| e.addr != victim_addr && e.addr != addr1)
        .collect();
    assert_eq!(others, vec![]);
    let s = w0.table.stats();
    assert_eq!(
        (s.malformed, s.unknown_sender, s.unknown_tunnel, s.replay),
        (0, 0, 0, 0),
        "{s:?}"
    );
    drop(procs);
}
