//! Correctness under real faults: three `xlane kv serve` members run as
//! real processes in hosts h0..h2 of the emulated datacenter, concurrent
//! clients in h3 reach them through the switch, and a seeded schedule kills
//! members (`kill -9`, then a restart from their data directory) and cuts
//! members off (their link down: a partition of one member from the rest
//! and from the clients), the leader among them whenever the draw hits it.
//! Dropped, duplicated and delayed packets are exercised in the simulator
//! (`cargo test -p xlane-xraft --test linearizable`): this kernel has no
//! `netem`.
//! Every operation is recorded (call and return times, or an unknown
//! outcome for writes that timed out or were cut off) and the history is
//! checked for linearizability with `xlane-lincheck`; after healing, every
//! member must hold the same value for every key. Each run prints its seed;
//! `KV_FAULT_SEED=N` repeats one, `KV_FAULT_RUNS=N` sets how many run (3 by
//! default, to keep CI short: the README's command runs 10).
//!
//! Needs root (network namespaces); without it the test says so and passes
//! nothing else.

mod common;

use common::Conn;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;
use xlane_lincheck::{check, CheckOptions, HistoryRecorder, KvInput, KvModel, KvOutput};
use xlane_testbed::{enter_netns, HostInfo, Testbed, TestbedConfig};

const MEMBERS: usize = 3;
const KEYS: u64 = 4;
const CLIENTS: usize = 4;
const FAULT_PHASE: Duration = Duration::from_secs(6);
const OP_TIMEOUT: Duration = Duration::from_millis(500);
const RAFT_PORT: u16 = 7001;
const RESP_PORT: u16 = 6379;

/// A small seeded generator (xorshift64*): the schedule is a function of
/// the seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn now_ns(t0: Instant) -> u64 {
    t0.elapsed().as_nanos() as u64
}

/// The members: processes in the testbed's host namespaces.
struct Members {
    hosts: Vec<HostInfo>,
    dir: PathBuf,
    children: Vec<Option<Child>>,
}

impl Members {
    fn peers(&self) -> Vec<String> {
        (0..MEMBERS)
            .map(|i| {
                let a = self.hosts[i].addr;
                format!("{}={a}:{RAFT_PORT}/{a}:{RESP_PORT}", i + 1)
            })
            .collect()
    }

    fn client_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((self.hosts[i].addr, RESP_PORT))
    }

    /// Starts member `i` (0-based) in its namespace and waits for its
    /// ready line.
    fn start(&mut self, i: usize) {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.hosts[i].netns])
            .arg(env!("CARGO_BIN_EXE_xlane"))
            .args(["kv", "serve", "--id", &(i + 1).to_string()]);
        for p in self.peers() {
            cmd.args(["--peer", &p]);
        }
        cmd.arg("--data")
            .arg(self.dir.join(format!("m{i}")))
            .args([
                "--fsync",
                "never",
                "--tick-ms",
                "10",
                "--max-latency-ms",
                "20",
            ])
            .args(["--snapshot-interval", "200"]);
        let (child, _, _) = common::spawn_until_ready(cmd.stderr(Stdio::null()));
        self.children[i] = Some(child);
    }

    /// `kill -9` by PID (the `ip netns exec` process execs into xlane, so
    /// its PID is the member's) and reap.
    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn running(&self, i: usize) -> bool {
        self.children[i].is_some()
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        for i in 0..MEMBERS {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The member a `MOVED` error points to.
fn moved_to(members: &[SocketAddr], e: &str) -> Option<usize> {
    let to = e.strip_prefix("MOVED ")?.rsplit(' ').next()?;
    members.iter().position(|m| m.to_string() == to)
}

type Recorder = Arc<Mutex<HistoryRecorder<KvInput, KvOutput>>>;

/// One client: random SETs (unique values) and GETs (linearizable reads)
/// on a few keys, following `MOVED`, until `stop`.
fn client(
    id: u64,
    seed: u64,
    members: Vec<SocketAddr>,
    rec: Recorder,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> (u64, u64) {
    let mut rng = Rng::new(seed ^ (id + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut target = rng.below(MEMBERS as u64) as usize;
    let mut conn: Option<Conn> = None;
    let (mut acked, mut unknown) = (0, 0);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if conn.is_none() {
            conn = Conn::try_open(members[target], OP_TIMEOUT);
            if conn.is_none() {
                target = (target + 1) % MEMBERS;
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        }
        let c = conn.as_mut().expect("open");
        let key = format!("k{}", rng.below(KEYS));
        let write = rng.below(2) == 0;
        n += 1;
        let value = format!("c{id}-{n}");
        let input = if write {
            KvInput::put(key.as_bytes(), value.as_bytes())
        } else {
            KvInput::get(key.as_bytes())
        };
        let h = rec.lock().unwrap().invoke(id, input, now_ns(t0));
        let reply = if write {
            c.try_cmd(&["SET".as_bytes(), key.as_bytes(), value.as_bytes()])
        } else {
            c.try_cmd(&["GET".as_bytes(), key.as_bytes()])
        };
        let at = now_ns(t0);
        let mut r = rec.lock().unwrap();
        match reply {
            Some(Reply::Simple(s)) if write && s == "OK" => {
                r.complete(h, KvOutput::Ok, at).unwrap();
                acked += 1;
            }
            Some(Reply::Bulk(v)) if !write => r.complete(h, KvOutput::Value(v), at).unwrap(),
            Some(Reply::Error(e)) => {
                // A follower refuses before proposing, and "was not applied"
                // is definite; anything else may or may not have happened.
                let definite = e.starts_with("MOVED ") || e.contains("was not applied");
                if !write || definite {
                    r.fail(h).unwrap();
                } else {
                    r.abandon(h).unwrap();
                    unknown += 1;
                }
                if let Some(l) = moved_to(&members, &e) {
                    target = l;
                    conn = None;
                }
            }
            other => {
                // Timeout, cut connection or an unexpected reply: unknown
                // for a write, no effect for a read.
                if write {
                    r.abandon(h).unwrap();
                    unknown += 1;
                } else {
                    r.fail(h).unwrap();
                }
                if other.is_none() {
                    conn = None;
                    target = rng.below(MEMBERS as u64) as usize;
                }
            }
        }
    }
    (acked, unknown)
}

/// Runs `args` in host `h`'s namespace (`ip netns exec`), which must work.
fn in_host(h: &HostInfo, args: &[&str]) {
    let st = Command::new("ip")
        .args(["netns", "exec", &h.netns])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("ip netns exec");
    assert!(st.success(), "{args:?} in {}", h.netns);
}

/// What the fault schedule did.
#[derive(Default, Debug)]
struct Faults {
    kills: u32,
    cuts: u32,
}

fn run(seed: u64) {
    let tb = Testbed::up(TestbedConfig {
        hosts: MEMBERS + 1,
        ..TestbedConfig::default()
    })
    .expect("testbed up");
    let hosts = tb.hosts().to_vec();
    let dir = std::env::temp_dir().join(format!("xlane-kv-faults-{}-{seed}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut m = Members {
        hosts: hosts.clone(),
        dir,
        children: (0..MEMBERS).map(|_| None).collect(),
    };
    for i in 0..MEMBERS {
        m.start(i);
    }
    let addrs: Vec<SocketAddr> = (0..MEMBERS).map(|i| m.client_addr(i)).collect();
    let rec: Recorder = Arc::new(Mutex::new(HistoryRecorder::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let client_host = hosts[MEMBERS].netns.clone();
    let workers: Vec<_> = (0..CLIENTS as u64)
        .map(|id| {
            let (addrs, rec, stop, ns) = (
                addrs.clone(),
                rec.clone(),
                stop.clone(),
                client_host.clone(),
            );
            std::thread::spawn(move || {
                let _ns = enter_netns(&ns).expect("enter the clients' host");
                client(id, seed, addrs, rec, t0, stop)
            })
        })
        .collect();

    // The fault schedule: one fault at a time, each healed before the next.
    let mut rng = Rng::new(seed);
    let mut faults = Faults::default();
    let end = Instant::now() + FAULT_PHASE;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200 + rng.below(300)));
        let victim = rng.below(MEMBERS as u64) as usize;
        let h = &hosts[victim];
        let hold = Duration::from_millis(300 + rng.below(700));
        match rng.below(2) {
            0 => {
                m.kill(victim);
                faults.kills += 1;
                std::thread::sleep(hold);
                m.start(victim);
            }
            _ => {
                in_host(h, &["ip", "link", "set", &h.iface, "down"]);
                faults.cuts += 1;
                std::thread::sleep(hold);
                in_host(h, &["ip", "link", "set", &h.iface, "up"]);
            }
        }
    }
    for i in 0..MEMBERS {
        assert!(m.running(i));
    }
    // Healed: let the clients see it work again, then stop them.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let (mut acked, mut unknown) = (0, 0);
    for w in workers {
        let (a, u) = w.join().expect("client thread");
        acked += a;
        unknown += u;
    }

    // Every member ends with the same value for every key: read each on
    // every member from its own state (READONLY) until they agree.
    let _ns = enter_netns(&client_host).expect("enter the clients' host");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut views = Vec::new();
        for a in &addrs {
            let view: Option<Vec<Option<Reply>>> =
                Conn::try_open(*a, OP_TIMEOUT).and_then(|mut c| {
                    c.try_cmd(&["READONLY"])?;
                    Some(
                        (0..KEYS)
                            .map(|k| c.try_cmd(&["GET".to_string(), format!("k{k}")]))
                            .collect(),
                    )
                });
            views.push(view);
        }
        let agree = views.iter().all(|v| v.is_some() && *v == views[0]);
        if agree {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "seed {seed}: replicas differ after healing: {views:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(_ns);

    let history = Arc::try_unwrap(rec)
        .unwrap_or_else(|_| panic!("the clients still hold the history"))
        .into_inner()
        .unwrap()
        .finish();
    let report = check(&KvModel, &history, &CheckOptions::default()).expect("well-formed history");
    println!(
        "seed {seed}: {} kill -9 + restarts, {} link cuts; {} ops, {acked} acknowledged writes, {unknown} writes of unknown outcome; linearizable: {}",
        faults.kills,
        faults.cuts,
        report.ops,
        report.verdict.is_linearizable()
    );
    assert!(
        report.verdict.is_linearizable(),
        "seed {seed}: history not linearizable: {:?}",
        report.verdict
    );
    assert!(acked > 0, "seed {seed}: no write succeeded");
    drop(m);
    drop(tb);
}

#[test]
fn histories_under_real_faults_are_linearizable() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root (network namespaces)");
        return;
    }
    let seeds: Vec<u64> = match std::env::var("KV_FAULT_SEED") {
        Ok(s) => vec![s.trim().parse().expect("KV_FAULT_SEED must be a u64")],
        Err(_) => {
            let runs: u64 = std::env::var("KV_FAULT_RUNS")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(3);
            (1..=runs).collect()
        }
    };
    for seed in seeds {
        run(seed);
    }
}
