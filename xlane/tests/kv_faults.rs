//! Correctness under real faults: three `xlane kv serve` members run as
//! real processes in hosts h0..h2 of the emulated datacenter, concurrent
//! clients in h3 reach them through the switch, and a seeded schedule
//! injects Jepsen's faults into one member at a time, the leader among them
//! whenever the draw hits it (`faults/inject.rs`): `kill -9` and restart,
//! its link cut, a pause (`SIGSTOP` past the election timeout), one-way
//! partitions (deaf: sends but receives nothing; mute: the reverse), its
//! wall clock stepped forward or back, its data directory's disk filled.
//! `KV_FAULTS=pause,deaf` (names separated by commas) injects only those
//! kinds; all are mixed by default.
//! Dropped, duplicated and delayed packets are exercised in the simulator
//! (`cargo test -p xlane-xraft --test linearizable`): this kernel has no
//! `netem`.
//! The clients issue strings (`SET`/`GET`), hashes (`HSET`, `HDEL`,
//! `HGETALL`), lists (`RPUSH`, `BLPOP` with a 0.2 s timeout, `LRANGE`;
//! `LPOP` inside transactions), sets (`SADD`, `SREM`,
//! `SMEMBERS`), sorted sets (`ZINCRBY`, `ZREM`, `ZRANGE ... WITHSCORES`)
//! and `MULTI`/`EXEC` transactions over one key; beside them a producer
//! and two consumers use a stream and its consumer group (`faults/streams.rs`:
//! no acknowledged entry lost or delivered twice, IDs never backwards), and
//! a publisher and a subscriber per member use a channel (`faults/pubsub.rs`:
//! every message at most once per subscription, in order).
//! Every operation is recorded (call and return times, or an unknown
//! outcome for writes that timed out or were cut off) and the history is
//! checked for linearizability with `xlane-lincheck`'s `TypedModel`; after
//! healing, every member must hold the same key space (each member's every
//! key, found by `SCAN`, with its `TYPE` and its value read by type). Each run prints its seed;
//! `KV_FAULT_SEED=N` repeats one, `KV_FAULT_RUNS=N` sets how many run (3 by
//! default, to keep CI short: the command in docs/kv.md runs 10).
//!
//! Needs root (network namespaces); without it the test says so and passes
//! nothing else.

mod common;
#[path = "faults/inject.rs"]
mod inject;
#[path = "faults/pubsub.rs"]
mod pubsub;
#[path = "faults/streams.rs"]
mod streams;

use common::Conn;
use inject::{Fault, SmallDisk};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;
use xlane_lincheck::{
    check, CheckOptions, HistoryRecorder, TypedCall, TypedInput, TypedModel, TypedOutput,
};
use xlane_testbed::{enter_netns, HostInfo, Testbed, TestbedConfig};

const MEMBERS: usize = 3;
const KEYS: u64 = 3;
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

/// The members: processes in the testbed's host namespaces, each with its
/// data directory on its own small disk and its own wall clock offset.
struct Members {
    hosts: Vec<HostInfo>,
    dir: PathBuf,
    children: Vec<Option<Child>>,
    disks: Vec<SmallDisk>,
}

/// Each member's data directory: a tmpfs of this many MiB (the runs write a
/// few MiB of log and snapshots).
const DISK_MIB: u32 = 64;

impl Members {
    fn peers(&self) -> Vec<String> {
        (0..MEMBERS)
            .map(|i| {
                let a = self.hosts[i].addr;
                format!("{}={a}:{RAFT_PORT}/{a}:{RESP_PORT}", i + 1)
            })
            .collect()
    }

    fn new(hosts: Vec<HostInfo>, dir: PathBuf) -> Members {
        let disks = (0..MEMBERS)
            .map(|i| SmallDisk::mount(&dir.join(format!("m{i}")), DISK_MIB))
            .collect();
        let m = Members {
            hosts,
            dir,
            children: (0..MEMBERS).map(|_| None).collect(),
            disks,
        };
        for i in 0..MEMBERS {
            inject::set_clock(&m.clock(i), 0);
        }
        m
    }

    /// The file member `i`'s wall clock offset is read from.
    fn clock(&self, i: usize) -> PathBuf {
        self.dir.join(format!("m{i}.clock"))
    }

    fn client_addr(&self, i: usize) -> SocketAddr {
        SocketAddr::from((self.hosts[i].addr, RESP_PORT))
    }

    /// Starts member `i` (0-based) in its namespace and waits for its
    /// ready line.
    fn start(&mut self, i: usize) {
        let mut cmd = Command::new("ip");
        cmd.envs(inject::faketime_env(&self.clock(i)));
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
        // Its log, kept across its restarts (shown if the run fails).
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(i))
            .expect("member log");
        let (child, _, _) = common::spawn_until_ready(cmd.stderr(log));
        self.children[i] = Some(child);
    }

    /// `kill -9` by PID (the `ip netns exec` process execs into xlane, so
    /// its PID is the member's) and reap.
    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
            inject::faketime_reaped(c.id());
        }
    }

    /// Stops or resumes member `i` (`SIGSTOP`, `SIGCONT`).
    fn signal(&self, i: usize, sig: libc::c_int) {
        if let Some(c) = &self.children[i] {
            // SAFETY: a plain syscall on the PID of a child this test started
            // (and has not reaped).
            unsafe { libc::kill(c.id() as libc::pid_t, sig) };
        }
    }

    /// Whether member `i` exited by itself (reaped if so).
    fn exited(&mut self, i: usize) -> bool {
        let gone = self.children[i]
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_some());
        if let Some(c) = self.children[i].take_if(|_| gone) {
            inject::faketime_reaped(c.id());
        }
        gone
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir.join(format!("m{i}.log"))
    }

    /// What a failed run shows of each member: its replication state
    /// (`INFO`) and the end of its log.
    fn report(&self, addrs: &[SocketAddr]) -> String {
        let mut out = String::new();
        for (i, a) in addrs.iter().enumerate() {
            let info = Conn::try_open(*a, OP_TIMEOUT)
                .and_then(|mut c| c.try_cmd(&["INFO", "everything"]))
                .map(|r| match r {
                    Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b)
                        .lines()
                        .filter(|l| {
                            [
                                "role:",
                                "master_host:",
                                "xlane_applied_ops:",
                                "xlane_leader_term:",
                            ]
                            .iter()
                            .any(|f| l.starts_with(f))
                        })
                        .collect::<Vec<_>>()
                        .join(" "),
                    other => format!("{other:?}"),
                })
                .unwrap_or_else(|| "no INFO".into());
            let log = std::fs::read_to_string(self.log(i)).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(25)..].join("\n    ");
            out += &format!(
                "\nmember {}: {info}\n  log (last 25 lines):\n    {tail}",
                i + 1
            );
        }
        out
    }

    fn running(&self, i: usize) -> bool {
        self.children[i].is_some()
    }
}

impl Drop for Members {
    fn drop(&mut self) {
        for i in 0..MEMBERS {
            self.signal(i, libc::SIGCONT);
            self.kill(i);
        }
        self.disks.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The member a `MOVED` error points to.
fn moved_to(members: &[SocketAddr], e: &str) -> Option<usize> {
    let to = e.strip_prefix("MOVED ")?.rsplit(' ').next()?;
    members.iter().position(|m| m.to_string() == to)
}

type Recorder = Arc<Mutex<HistoryRecorder<TypedInput, TypedOutput>>>;

/// A random operation: its key, what the model is told, the command words
/// (several for a transaction), and whether it writes.
fn draw(rng: &mut Rng, id: u64, n: u64) -> (TypedInput, Vec<Vec<String>>, bool) {
    let unique = format!("c{id}-{n}");
    let pick = |rng: &mut Rng, xs: &[&str]| xs[rng.below(xs.len() as u64) as usize].to_string();
    let ty = rng.below(6);
    let key = format!(
        "{}{}",
        // Lists alone ("q": pushes, blocking pops) and lists that
        // transactions also SET ("l": WRONGTYPE inside EXEC).
        ["k", "h", "q", "s", "z", "l"][ty as usize],
        rng.below(KEYS)
    );
    let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let b = |s: &str| s.as_bytes().to_vec();
    // One command on `key`: (model call, words, writes).
    let one = |rng: &mut Rng, ty: u64, in_multi: bool| -> (TypedCall, Vec<String>, bool) {
        let r = rng.below(3);
        match (ty, r) {
            (0, 0) => (TypedCall::Get, w(&["GET", key.as_str()]), false),
            (0, _) => (
                TypedCall::Set(b(unique.as_str())),
                w(&["SET", key.as_str(), unique.as_str()]),
                true,
            ),
            (1, 0) => (TypedCall::HGetAll, w(&["HGETALL", key.as_str()]), false),
            (1, 1) => {
                let f = pick(rng, &["a", "b", "c"]);
                (
                    TypedCall::HDel(b(f.as_str())),
                    w(&["HDEL", key.as_str(), f.as_str()]),
                    true,
                )
            }
            (1, _) => {
                let f = pick(rng, &["a", "b", "c"]);
                (
                    TypedCall::HSet(b(f.as_str()), b(unique.as_str())),
                    w(&["HSET", key.as_str(), f.as_str(), unique.as_str()]),
                    true,
                )
            }
            (2, 0) => (
                TypedCall::LRange,
                w(&["LRANGE", key.as_str(), "0", "-1"]),
                false,
            ),
            // A blocking pop is an LPOP at the instant it is served (or,
            // timed out, at one where the list was empty).
            (2, 1) if !in_multi => (TypedCall::LPop, w(&["BLPOP", key.as_str(), "0.2"]), true),
            (2, 1) => (TypedCall::LPop, w(&["LPOP", key.as_str()]), true),
            (2, _) => (
                TypedCall::RPush(b(unique.as_str())),
                w(&["RPUSH", key.as_str(), unique.as_str()]),
                true,
            ),
            (3, 0) => (TypedCall::SMembers, w(&["SMEMBERS", key.as_str()]), false),
            (3, 1) => {
                let m = pick(rng, &["a", "b", "c"]);
                (
                    TypedCall::SRem(b(m.as_str())),
                    w(&["SREM", key.as_str(), m.as_str()]),
                    true,
                )
            }
            (3, _) => {
                let m = pick(rng, &["a", "b", "c"]);
                (
                    TypedCall::SAdd(b(m.as_str())),
                    w(&["SADD", key.as_str(), m.as_str()]),
                    true,
                )
            }
            (4, 0) => (
                TypedCall::ZRange,
                w(&["ZRANGE", key.as_str(), "0", "-1", "WITHSCORES"]),
                false,
            ),
            (4, 1) => {
                let m = pick(rng, &["a", "b"]);
                (
                    TypedCall::ZRem(b(m.as_str())),
                    w(&["ZREM", key.as_str(), m.as_str()]),
                    true,
                )
            }
            (_, _) => {
                let m = pick(rng, &["a", "b"]);
                let d = rng.below(5) as i64 - 2;
                (
                    TypedCall::ZIncrBy(d, b(m.as_str())),
                    w(&["ZINCRBY", key.as_str(), d.to_string().as_str(), m.as_str()]),
                    true,
                )
            }
        }
    };
    if ty == 5 {
        // A transaction: two to four commands of the list type on one key
        // (sometimes one of another type: WRONGTYPE inside EXEC).
        let mut calls = Vec::new();
        let mut words = vec![w(&["MULTI"])];
        for _ in 0..2 + rng.below(3) {
            let t = if rng.below(6) == 0 { 0 } else { 2 };
            let (c, v, _) = one(rng, t, true);
            calls.push(c);
            words.push(v);
        }
        words.push(w(&["EXEC"]));
        return (
            TypedInput::new(key.as_bytes(), TypedCall::Multi(calls)),
            words,
            true,
        );
    }
    let (c, v, write) = one(rng, ty, false);
    (TypedInput::new(key.as_bytes(), c), vec![v], write)
}

/// What the model sees of a reply (`None`: not a reply the command gives).
fn output(call: &TypedCall, r: &Reply) -> Option<TypedOutput> {
    Some(match r {
        // BLPOP's [key, element], or nil when it timed out.
        Reply::Array(Some(kv)) if *call == TypedCall::LPop && kv.len() == 2 => match &kv[1] {
            Reply::Bulk(Some(v)) => TypedOutput::Bulk(Some(v.clone())),
            _ => return None,
        },
        Reply::Array(None) if *call == TypedCall::LPop => TypedOutput::Bulk(None),
        Reply::Simple(s) if s == "OK" => TypedOutput::Ok,
        Reply::Integer(i) => TypedOutput::Int(*i),
        Reply::Bulk(v) => TypedOutput::Bulk(v.clone()),
        Reply::Error(e) if e.starts_with("WRONGTYPE") => TypedOutput::WrongType,
        Reply::Array(Some(items)) => match call {
            TypedCall::Multi(calls) if calls.len() == items.len() => TypedOutput::Exec(
                calls
                    .iter()
                    .zip(items)
                    .map(|(c, r)| output(c, r))
                    .collect::<Option<_>>()?,
            ),
            TypedCall::Multi(_) => return None,
            _ => TypedOutput::Items(
                items
                    .iter()
                    .map(|i| match i {
                        Reply::Bulk(Some(b)) => Some(b.clone()),
                        _ => None,
                    })
                    .collect::<Option<_>>()?,
            ),
        },
        _ => return None,
    })
}

/// One client: random commands of every type (unique values) and
/// transactions on a few keys, following `MOVED`, until `stop`.
fn client(
    id: u64,
    seed: u64,
    members: Vec<SocketAddr>,
    rec: Recorder,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> (u64, u64, u64) {
    let mut rng = Rng::new(seed ^ (id + 1).wrapping_mul(0xA24B_AED4_963E_E407));
    let mut target = rng.below(MEMBERS as u64) as usize;
    let mut conn: Option<Conn> = None;
    let (mut acked, mut unknown, mut served) = (0, 0, 0);
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
        n += 1;
        let (input, words, write) = draw(&mut rng, id, n);
        let call = input.call.clone();
        let h = rec.lock().unwrap().invoke(id, input, now_ns(t0));
        // A transaction's last reply is EXEC's (MULTI and the queued
        // commands answer locally).
        let reply = c.try_pipeline(&words).and_then(|mut r| r.pop());
        let at = now_ns(t0);
        let mut r = rec.lock().unwrap();
        match reply.as_ref().map(|x| (x, output(&call, x))) {
            Some((_, Some(o))) => {
                if words[0][0] == "BLPOP" && matches!(o, TypedOutput::Bulk(Some(_))) {
                    served += 1;
                }
                r.complete(h, o, at).unwrap();
                if write {
                    acked += 1;
                }
            }
            Some((Reply::Error(e), None)) => {
                // A follower refuses before proposing, and "was not applied"
                // is definite; anything else may or may not have happened.
                let definite = e.starts_with("MOVED ") || e.contains("was not applied");
                if !write || definite {
                    r.fail(h).unwrap();
                } else {
                    r.abandon(h).unwrap();
                    unknown += 1;
                }
                if let Some(l) = moved_to(&members, e) {
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
    (acked, unknown, served)
}

/// Which keys differ between the members' dumps (at most 10 named), and
/// each dump's size: a failure's summary, where the dumps themselves run to
/// megabytes.
fn differences(views: &[Option<Dump>]) -> String {
    let mut keys: Vec<&Vec<u8>> = views
        .iter()
        .flatten()
        .flatten()
        .map(|(k, _, _)| k)
        .collect();
    keys.sort();
    keys.dedup();
    let differ: Vec<String> = keys
        .into_iter()
        .filter(|k| {
            let vals: Vec<_> = views
                .iter()
                .map(|v| v.as_ref().and_then(|v| v.iter().find(|(x, _, _)| x == *k)))
                .collect();
            vals.iter().any(|v| *v != vals[0])
        })
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let sizes: Vec<String> = views
        .iter()
        .map(|v| {
            v.as_ref()
                .map_or("no dump".into(), |v| format!("{} keys", v.len()))
        })
        .collect();
    format!(
        "{} keys differ ({}{}); dumps: {}",
        differ.len(),
        differ[..differ.len().min(10)].join(", "),
        if differ.len() > 10 { ", ..." } else { "" },
        sizes.join(", ")
    )
}

/// A member's key space: each key, its `TYPE` and its value.
type Dump = Vec<(Vec<u8>, Reply, Reply)>;

/// A member's whole key space from its own state (`READONLY`): every key
/// `SCAN` finds, sorted, with its `TYPE` and its value read by type.
fn dump(a: SocketAddr) -> Option<Dump> {
    let mut c = Conn::try_open(a, OP_TIMEOUT)?;
    c.try_cmd(&["READONLY"])?;
    let mut keys = Vec::new();
    let mut cursor = b"0".to_vec();
    loop {
        let scan = [
            b"SCAN".to_vec(),
            cursor.clone(),
            b"COUNT".to_vec(),
            b"1000".to_vec(),
        ];
        let Reply::Array(Some(mut page)) = c.try_cmd(&scan)? else {
            return None;
        };
        let Some(Reply::Array(Some(ks))) = page.pop() else {
            return None;
        };
        for k in ks {
            if let Reply::Bulk(Some(k)) = k {
                keys.push(k);
            }
        }
        match page.pop() {
            Some(Reply::Bulk(Some(next))) if next != b"0" => cursor = next,
            _ => break,
        }
    }
    keys.sort();
    keys.dedup();
    let mut out = Vec::new();
    for k in keys {
        let ty = c.try_cmd(&[b"TYPE".to_vec(), k.clone()])?;
        let read: &[&str] = match &ty {
            Reply::Simple(t) if t == "string" => &["GET"],
            Reply::Simple(t) if t == "hash" => &["HGETALL"],
            Reply::Simple(t) if t == "list" => &["LRANGE", "0", "-1"],
            Reply::Simple(t) if t == "set" => &["SMEMBERS"],
            Reply::Simple(t) if t == "zset" => &["ZRANGE", "0", "-1", "WITHSCORES"],
            Reply::Simple(t) if t == "stream" => &["XRANGE", "-", "+"],
            _ => &["TYPE"],
        };
        let mut words: Vec<Vec<u8>> = vec![read[0].as_bytes().to_vec(), k.clone()];
        words.extend(read[1..].iter().map(|w| w.as_bytes().to_vec()));
        let mut v = c.try_cmd(&words)?;
        if read[0] == "XRANGE" {
            // And its groups: consumers, pending, last delivered ID.
            let groups = c.try_cmd(&[b"XINFO".to_vec(), b"GROUPS".to_vec(), k.clone()])?;
            v = Reply::Array(Some(vec![v, groups]));
        }
        out.push((k, ty, v));
    }
    Some(out)
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

/// Runs `f` on a thread in network namespace `ns`.
fn in_ns<T: Send + 'static>(
    ns: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::spawn(move || {
        let _ns = enter_netns(&ns).expect("enter the clients' host");
        f()
    })
}

/// What the fault schedule did: faults by kind, and the members a full
/// disk stopped (restarted once it had room again).
#[derive(Default, Debug)]
struct Faults {
    done: BTreeMap<Fault, u32>,
    stopped_by_disk: u32,
}

impl Faults {
    fn summary(&self) -> String {
        let kinds: Vec<String> = self
            .done
            .iter()
            .map(|(f, n)| format!("{n} {}", f.name()))
            .collect();
        format!(
            "faults {} ({} members stopped on a full disk)",
            kinds.join(", "),
            self.stopped_by_disk
        )
    }
}

/// Injects `fault` into member `victim`, holds it for `hold`, heals it.
fn inject(m: &mut Members, fault: Fault, victim: usize, hold: Duration, rng: &mut Rng) -> bool {
    let h = m.hosts[victim].clone();
    match fault {
        Fault::Kill => {
            m.kill(victim);
            std::thread::sleep(hold);
            m.start(victim);
        }
        Fault::Cut => {
            in_host(&h, &["ip", "link", "set", &h.iface, "down"]);
            std::thread::sleep(hold);
            in_host(&h, &["ip", "link", "set", &h.iface, "up"]);
        }
        Fault::Pause => {
            m.signal(victim, libc::SIGSTOP);
            // Past the election timeout (10 ticks of 10 ms) many times over.
            std::thread::sleep(hold * 2);
            m.signal(victim, libc::SIGCONT);
        }
        Fault::Deaf | Fault::Mute => {
            let rule = inject::one_way_rule(fault, &h.iface);
            let with = |op: &str| {
                let mut args = vec!["iptables-legacy", "-w", op];
                args.extend(rule.iter().map(String::as_str));
                in_host(&h, &args);
            };
            with("-A");
            std::thread::sleep(hold);
            with("-D");
        }
        Fault::Clock => {
            // Forward or back by 1 to 30 s; libfaketime reads the offset
            // within a second, so it holds for at least one more.
            let secs = [1, 5, 30][rng.below(3) as usize] * if rng.below(2) == 0 { 1 } else { -1 };
            inject::set_clock(&m.clock(victim), secs);
            std::thread::sleep(hold + Duration::from_secs(1));
            inject::set_clock(&m.clock(victim), 0);
        }
        Fault::Disk => {
            m.disks[victim].fill();
            std::thread::sleep(hold);
            m.disks[victim].free();
            if m.exited(victim) {
                m.start(victim);
                return true;
            }
        }
    }
    false
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
    std::fs::create_dir_all(&dir).expect("the members' directory");
    let mut m = Members::new(hosts.clone(), dir);
    for i in 0..MEMBERS {
        m.start(i);
    }
    // No key file, raft on a routable address: each member said so.
    for i in 0..MEMBERS {
        let log = std::fs::read_to_string(m.log(i)).unwrap_or_default();
        assert!(
            log.contains("raft traffic on ")
                && log.contains("not authenticated")
                && log.contains("--key-file"),
            "member {}: no start-up warning in {log:?}",
            i + 1
        );
    }
    let addrs: Vec<SocketAddr> = (0..MEMBERS).map(|i| m.client_addr(i)).collect();
    let rec: Recorder = Arc::new(Mutex::new(HistoryRecorder::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let client_host = hosts[MEMBERS].netns.clone();
    // The stream's clients: one producer, two consumers of one group; a
    // publisher, and a subscriber on every member.
    let ns = || client_host.clone();
    let a = addrs.clone();
    in_ns(ns(), move || streams::create_group(&a))
        .join()
        .expect("group");
    let (a, st) = (addrs.clone(), stop.clone());
    let producer = in_ns(ns(), move || streams::producer(a, st));
    let consumers: Vec<_> = (1..=2)
        .map(|i| {
            let (a, st) = (addrs.clone(), stop.clone());
            in_ns(ns(), move || streams::consumer(format!("c{i}"), a, st))
        })
        .collect();
    let (a, st) = (addrs.clone(), stop.clone());
    let publisher = in_ns(ns(), move || pubsub::publisher(a, st));
    let subscribers: Vec<_> = addrs
        .iter()
        .map(|&a| {
            let st = stop.clone();
            in_ns(ns(), move || pubsub::subscriber(a, st))
        })
        .collect();
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
    let kinds = inject::selected();
    let mut rng = Rng::new(seed);
    let mut faults = Faults::default();
    let end = Instant::now() + FAULT_PHASE;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200 + rng.below(300)));
        let victim = rng.below(MEMBERS as u64) as usize;
        let hold = Duration::from_millis(300 + rng.below(700));
        let fault = kinds[rng.below(kinds.len() as u64) as usize];
        if inject(&mut m, fault, victim, hold, &mut rng) {
            faults.stopped_by_disk += 1;
        }
        *faults.done.entry(fault).or_default() += 1;
    }
    for i in 0..MEMBERS {
        assert!(
            !m.exited(i) && m.running(i),
            "seed {seed}: member {} is not running after the faults healed{}",
            i + 1,
            m.report(&addrs)
        );
    }
    // Healed: let the clients see it work again, then stop them.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let (mut acked, mut unknown, mut served) = (0, 0, 0);
    for w in workers {
        let (a, u, s) = w.join().expect("client thread");
        acked += a;
        unknown += u;
        served += s;
    }

    let mut seen = producer.join().expect("producer");
    for w in consumers {
        seen.delivered.extend(w.join().expect("consumer").delivered);
    }
    let published = publisher.join().expect("publisher");
    let listened: Vec<_> = subscribers
        .into_iter()
        .map(|w| w.join().expect("subscriber"))
        .collect();
    let pubsub = pubsub::verify(&published, &listened);

    // Every member ends with the same key space: dump each member's from
    // its own state (READONLY) until they agree.
    let _ns = enter_netns(&client_host).expect("enter the clients' host");
    let deadline = Instant::now() + Duration::from_secs(20);
    let keys = loop {
        let views: Vec<_> = addrs.iter().map(|a| dump(*a)).collect();
        let agree = views.iter().all(|v| v.is_some() && *v == views[0]);
        if agree {
            break views[0].as_ref().map_or(0, Vec::len);
        }
        if Instant::now() >= deadline {
            panic!(
                "seed {seed}: replicas differ after healing: {}{}",
                differences(&views),
                m.report(&addrs)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let stream = streams::verify(addrs[0], &seen);
    drop(_ns);

    let history = Arc::try_unwrap(rec)
        .unwrap_or_else(|_| panic!("the clients still hold the history"))
        .into_inner()
        .unwrap()
        .finish();
    let report =
        check(&TypedModel, &history, &CheckOptions::default()).expect("well-formed history");
    println!(
        "seed {seed}: {}; {} ops, {acked} acknowledged writes ({served} blocking pops served), {unknown} writes of unknown outcome; {keys} keys identical on every member; linearizable: {}",
        faults.summary(),
        report.ops,
        report.verdict.is_linearizable()
    );
    assert!(
        report.verdict.is_linearizable(),
        "seed {seed}: history not linearizable: {:?}",
        report.verdict
    );
    println!("seed {seed}: {stream}");
    println!("seed {seed}: {pubsub}");
    assert!(acked > 0, "seed {seed}: no write succeeded");
    assert!(
        !seen.delivered.is_empty(),
        "seed {seed}: no stream entry delivered"
    );
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
