//! Transactions across shards, ordered by 1Pipe, under leader kills,
//! a paused leader and a leader's clock stepped.
//!
//! Two shards, each a three-member `xlane kv serve` group of real
//! processes on loopback; a real `xlane pipe switchd --hold-silent` hop;
//! two `xlane pipe coordinator` replicas keeping their decisions in shard
//! 0's group; a `xlane kv txn-shard` applier per shard and three `xlane kv
//! txn-proxy` fronts. Six clients run `MULTI`/`EXEC` transactions of the
//! list-append workload through the proxies (each appends its unique id
//! to 1–3 keys with `RPUSH` and reads 0–2 other keys whole with `LRANGE`;
//! the six keys are spread over both shards), moving to the next proxy
//! when theirs fails. The test kills each shard's Raft leader (`kill -9`)
//! and restarts it, so the appliers lose replies and must find out
//! through their marker key whether a part ran, and it kills a proxy
//! with transactions in flight, which the coordinator recovers. Two of
//! Jepsen's faults join them: shard 0's leader has its wall clock stepped
//! 30 s forward, then back (its members run under libfaketime), and
//! shard 1's leader is paused (`SIGSTOP`) for longer than an election
//! timeout, then resumed. (One-way partitions and a full disk are
//! `kv_faults`' only: they need a member in its own network namespace and
//! on its own small disk, and these processes share loopback.)
//! Afterwards every key is read in one ordered transaction, and the
//! history is checked with `xlane_lincheck::check_strict_serializable`:
//! no dependency cycle, real-time order included (strictly serializable:
//! the shards run with a skew wait), no transaction present on some of its
//! keys and absent from others (atomic), no lost or impossible write.
//! Seeded (`KV_TXN_SEED`, printed).

mod common;
#[allow(dead_code)]
#[path = "faults/inject.rs"]
mod inject;

use common::procs::{Procs, Shard};
use common::Conn;
use std::collections::BTreeMap;
use std::net::SocketAddrV4;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use xlane_kv::resp::Reply;
use xlane_kv::xshard::shard_of;
use xlane_lincheck::{check_strict_serializable, Txn, TxnOutcome};

const SHARDS: u32 = 2;
const CLIENTS: usize = 6;
const PROXIES: usize = 3;
/// Each proxy's `--maxclients` (the load's clients and the checks' fit).
const PROXY_MAX_CLIENTS: usize = 8;
const KEYS_PER_SHARD: usize = 3;
const PER_CLIENT: usize = 400;
const PACE: Duration = Duration::from_millis(12);

/// Keys, `KEYS_PER_SHARD` on each shard.
fn keys() -> Vec<String> {
    let mut per = vec![Vec::new(); SHARDS as usize];
    for i in 0.. {
        let k = format!("x{i}");
        let s = shard_of(k.as_bytes(), SHARDS) as usize;
        if per[s].len() < KEYS_PER_SHARD {
            per[s].push(k);
        }
        if per.iter().all(|p| p.len() == KEYS_PER_SHARD) {
            break;
        }
    }
    per.concat()
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn list(r: &Reply) -> Option<Vec<u64>> {
    match r {
        Reply::Array(Some(items)) => items
            .iter()
            .map(|i| match i {
                Reply::Bulk(Some(b)) => std::str::from_utf8(b).ok()?.parse().ok(),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// What the client learned from an EXEC's reply.
fn outcome(exec: Option<&Reply>, reads: &[String]) -> (TxnOutcome, Vec<(String, Vec<u64>)>) {
    let failed = |e: &str| e.starts_with("ABORTED") || e.starts_with("TRYAGAIN not sent");
    match exec {
        Some(Reply::Array(Some(items))) if items.iter().all(|r| !r.is_error()) => {
            let n = items.len() - reads.len();
            let seen: Option<Vec<_>> = reads
                .iter()
                .zip(&items[n..])
                .map(|(k, r)| list(r).map(|l| (k.clone(), l)))
                .collect();
            match seen {
                Some(s) => (TxnOutcome::Committed, s),
                None => panic!("unexpected replies {items:?}"),
            }
        }
        Some(Reply::Error(e)) if failed(e) => (TxnOutcome::Failed, Vec::new()),
        _ => (TxnOutcome::Unknown, Vec::new()),
    }
}

#[test]
fn cross_shard_transactions_are_atomic_and_serializable_under_leader_kills() {
    let seed = std::env::var("KV_TXN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    println!("seed {seed} (KV_TXN_SEED)");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let root = std::env::temp_dir().join(format!("xlane-kv-txn-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&root).expect("dir");
    // Every 1Pipe daemon seals its datagrams with one group key.
    let key_file = root.join("pipe-keys.toml");
    let ring = xlane_auth::KeyRing::from_pairs(&[(1, xlane_auth::Key::random().expect("key"))]);
    std::fs::write(&key_file, ring.to_toml()).expect("key file");
    let key_file = key_file.to_str().expect("utf-8 path").to_string();
    let mut procs = Procs::default();
    let bin = env!("CARGO_BIN_EXE_xlane");

    // The shards' groups; shard 0's members read their wall clock's
    // offset from a file each (libfaketime).
    let mut shards: Vec<Shard> = (0..SHARDS).map(|s| Shard::new(&root, s)).collect();
    let clock = |id: usize| root.join(format!("s0n{id}.clock"));
    let member = |sh: &Shard, s: usize, id: usize| {
        let mut cmd = sh.command(id);
        if s == 0 {
            cmd.envs(inject::faketime_env(&clock(id)));
        }
        cmd
    };
    let mut faked = FaketimeReaped(Vec::new());
    for (s, sh) in shards.iter_mut().enumerate() {
        for id in 1..=3 {
            if s == 0 {
                inject::set_clock(&clock(id), 0);
            }
            let p = procs.start(&format!("s{s}n{id}"), &mut member(sh, s, id));
            sh.procs.push(p);
            faked.0.extend(procs.pid(p).filter(|_| s == 0));
        }
    }
    for sh in &shards {
        sh.leader().expect("each shard elects a leader");
    }

    // 1Pipe: the hop, the appliers (ids 1, 2), the proxies (3, 4, 5) and
    // two coordinator replicas keeping their decisions in shard 0's group.
    let hop = xlane_testports::udp();
    let applier_pipes: Vec<SocketAddrV4> = xlane_testports::udp_n(SHARDS as usize);
    let proxy_pipes: Vec<SocketAddrV4> = xlane_testports::udp_n(PROXIES);
    let coords: Vec<SocketAddrV4> = xlane_testports::udp_n(2);
    let mut coord_procs = Vec::new();
    for (i, c) in coords.iter().enumerate() {
        let mut cmd = Command::new(bin);
        cmd.args(["pipe", "coordinator", "--bind", &c.to_string()]);
        cmd.args(["--key-file", &key_file]);
        for m in &shards[0].clients {
            cmd.args(["--store", &m.to_string()]);
        }
        for (j, a) in applier_pipes.iter().chain(&proxy_pipes).enumerate() {
            cmd.args(["--process", &format!("{}={a}", j + 1)]);
        }
        coord_procs.push(procs.start(&format!("coordinator{i}"), &mut cmd));
    }
    let with_coords = |c: &mut Command| {
        for a in &coords {
            c.args(["--coordinator", &a.to_string()]);
        }
        c.args(["--key-file", &key_file]);
    };
    let mut switchd = Command::new(bin);
    // Silent after 500 ms: far above this machine's stalls, so that only
    // the killed proxy is found silent.
    switchd.args([
        "pipe",
        "switchd",
        "--bind",
        &hop.to_string(),
        "--hold-silent",
    ]);
    switchd.args(["--beacon-us", "1000", "--dead-after", "500"]);
    with_coords(&mut switchd);
    for (i, a) in applier_pipes.iter().chain(&proxy_pipes).enumerate() {
        switchd.args([
            "--input",
            &a.to_string(),
            "--route",
            &format!("{}={a}", i + 1),
        ]);
    }
    procs.start("switchd", &mut switchd);
    let mut appliers = Vec::new();
    for (s, sh) in shards.iter().enumerate() {
        let mut c = Command::new(bin);
        c.args(["kv", "txn-shard", "--shard", &s.to_string()]);
        c.args([
            "--pipe",
            &applier_pipes[s].to_string(),
            "--hop",
            &hop.to_string(),
        ]);
        for (i, p) in proxy_pipes.iter().enumerate() {
            c.args(["--proxy", &format!("{}={p}", SHARDS as usize + 1 + i)]);
        }
        for m in &sh.clients {
            c.args(["--member", &m.to_string()]);
        }
        with_coords(&mut c);
        // The skew wait of a multi-host deployment (here one clock, so
        // it only delays): parts run 0.5 ms after their timestamp.
        c.args(["--skew-us", "500"]);
        appliers.push(procs.start(&format!("txn-shard{s}"), &mut c));
    }
    let mut proxies = Vec::new();
    let mut fronts = Vec::new();
    for (i, p) in proxy_pipes.iter().enumerate() {
        let bind = xlane_testports::tcp();
        let mut c = Command::new(bin);
        c.args([
            "kv",
            "txn-proxy",
            "--id",
            &(SHARDS as usize + 1 + i).to_string(),
        ]);
        c.args(["--shards", &SHARDS.to_string(), "--bind", &bind.to_string()]);
        c.args(["--pipe", &p.to_string(), "--replies", "127.0.0.1:0"]);
        c.args(["--hop", &hop.to_string()]);
        c.args(["--maxclients", &PROXY_MAX_CLIENTS.to_string()]);
        with_coords(&mut c);
        proxies.push(procs.start(&format!("txn-proxy{i}"), &mut c));
        fronts.push(bind);
    }

    // Before the load: what the proxy refuses, it refuses clearly. Past
    // --maxclients, a connection gets Redis's error.
    let mut c = Conn::open(fronts[0]);
    assert_eq!(c.cmd(&["PING"]), Reply::Simple("PONG".into()));
    // Its threads, with one client: the clients share its one event loop.
    let threads = || {
        let pid = procs.pid(proxies[0]).expect("proxy 0 runs");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .expect("Threads: line")
    };
    let one_client = threads();
    let mut held = Vec::new();
    let refused = loop {
        assert!(held.len() < 2 * PROXY_MAX_CLIENTS, "no connection refused");
        let mut h = Conn::open(fronts[0]);
        match h.try_cmd(&["PING"]) {
            Some(Reply::Simple(p)) if p == "PONG" => held.push(h),
            other => break other,
        }
    };
    assert_eq!(held.len(), PROXY_MAX_CLIENTS - 1, "{refused:?}");
    assert_eq!(threads(), one_client, "a thread per client");
    assert_eq!(
        refused,
        Some(Reply::Error("ERR max number of clients reached".into()))
    );
    drop(held);
    // Their slots free as the connections close: room again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while Conn::open(fronts[0]).try_cmd(&["PING"]) != Some(Reply::Simple("PONG".into())) {
        assert!(
            std::time::Instant::now() < deadline,
            "no room after the held connections closed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let ks = keys();
    let r = c.cmd(&["RENAME", &ks[0], &ks[KEYS_PER_SHARD]]);
    assert!(
        matches!(&r, Reply::Error(e) if e.starts_with("CROSSSLOT")),
        "{r:?}"
    );
    let r = c.cmd(&["DBSIZE"]);
    assert!(
        matches!(&r, Reply::Error(e) if e.contains("names no key")),
        "{r:?}"
    );
    // A cross-shard MSET and MGET, as redis-cli would send them.
    let (a, b) = (&ks[0], &ks[KEYS_PER_SHARD]);
    assert_eq!(
        c.cmd(&["MSET", "m:a", "1", "m:b", "2", "m:c", "3"]),
        Reply::ok()
    );
    assert_eq!(
        c.cmd(&["MGET", "m:c", "m:a", "m:b"]),
        Reply::Array(Some(vec![
            Reply::bulk("3"),
            Reply::bulk("1"),
            Reply::bulk("2")
        ]))
    );
    assert_eq!(
        c.cmd(&["DEL", "m:a", "m:b", "m:c", a, b]),
        Reply::Integer(3)
    );

    // A forged part: a well-formed 1Pipe data packet, as proxy 3 would
    // send it, carrying a SET for shard 0, without the key. Refused by the
    // MAC check, counted, never applied (checked at the end).
    let forged_key = (0..)
        .map(|i| format!("forged:{i}"))
        .find(|k| shard_of(k.as_bytes(), SHARDS) == 0)
        .expect("a key of shard 0");
    let forger = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let reply_to = match forger.local_addr().expect("addr") {
        std::net::SocketAddr::V4(a) => a,
        std::net::SocketAddr::V6(_) => unreachable!(),
    };
    let mut part = Vec::new();
    xlane_kv::xshard::msg::SubTxn {
        id: 1,
        reply_to,
        cmds: vec![["SET", forged_key.as_str(), "1"]
            .iter()
            .map(|w| w.as_bytes().to_vec())
            .collect()],
    }
    .encode(&mut part)
    .expect("a part");
    let now = xlane_pipe::udp::now_ns();
    let header = xlane_pipe::wire::Header {
        kind: xlane_pipe::wire::Kind::Data,
        reliable: true,
        src: SHARDS + 1,
        dst: xlane_kv::xshard::applier_id(0),
        seq: 1,
        ts: now,
        barrier: now,
        commit: now,
    };
    let mut packet = vec![0u8; xlane_pipe::wire::HEADER_LEN + part.len()];
    let n = header.emit(&part, &mut packet).expect("a packet");
    for _ in 0..3 {
        forger
            .send_to(&packet[..n], applier_pipes[0])
            .expect("send");
    }

    // The load.
    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(1));
    let history = Arc::new(Mutex::new(Vec::<Txn>::new()));
    // The clients' shared clock for the real-time order.
    let base = Instant::now();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let (stop, next_id, history, ks) =
                (stop.clone(), next_id.clone(), history.clone(), ks.clone());
            let fronts = fronts.clone();
            let mut front = w % fronts.len();
            let mut rng = Rng(seed.wrapping_mul(31).wrapping_add(w as u64 + 1) | 1);
            std::thread::spawn(move || {
                let mut conn: Option<Conn> = None;
                // At most PER_CLIENT each, so that a shard's reply to a
                // read of whole lists stays within one datagram, one every
                // PACE, so that the load spans both leader kills.
                let start = Instant::now();
                for n in 0..PER_CLIENT {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Some(w) = (PACE * n as u32).checked_sub(start.elapsed()) {
                        std::thread::sleep(w);
                    }
                    let id = next_id.fetch_add(1, Ordering::Relaxed);
                    let mut pool = ks.clone();
                    let mut pick = |n: u64| -> Vec<String> {
                        let n = (n as usize).min(pool.len());
                        (0..n)
                            .map(|_| pool.remove(rng.below(pool.len() as u64) as usize))
                            .collect()
                    };
                    let appends = pick(1 + id % 3);
                    let reads = pick(id % 3);
                    let mut cmds = vec![vec!["MULTI".to_string()]];
                    for k in &appends {
                        cmds.push(vec!["RPUSH".into(), k.clone(), id.to_string()]);
                    }
                    for k in &reads {
                        cmds.push(vec!["LRANGE".into(), k.clone(), "0".into(), "-1".into()]);
                    }
                    cmds.push(vec!["EXEC".into()]);
                    if conn.is_none() {
                        conn = Conn::try_open(fronts[front], Duration::from_secs(10));
                    }
                    let call = base.elapsed().as_nanos() as u64;
                    let replies = conn.as_mut().and_then(|c| c.try_pipeline(&cmds));
                    let ret = base.elapsed().as_nanos() as u64;
                    if replies.is_none() {
                        // Its proxy died or hung: the next one, as a
                        // client with a list of proxies would.
                        conn = None;
                        front = (front + 1) % fronts.len();
                    }
                    let (outcome, seen) = outcome(replies.as_ref().and_then(|r| r.last()), &reads);
                    history.lock().expect("lock").push(Txn {
                        id,
                        appends,
                        reads: seen,
                        outcome,
                        call,
                        ret: (outcome == TxnOutcome::Committed).then_some(ret),
                    });
                }
            })
        })
        .collect();

    // The faults: shard 0's leader's clock stepped, each shard's leader
    // killed then restarted, a proxy killed, shard 1's leader paused.
    let t0 = Instant::now();
    let at = |s: f64| {
        let d = Duration::from_secs_f64(s);
        if let Some(w) = d.checked_sub(t0.elapsed()) {
            std::thread::sleep(w);
        }
    };
    let mut kills = 0;
    let mut kill_leader = |procs: &mut Procs, s: usize| -> usize {
        let l = shards[s].leader().expect("a leader before the kill");
        procs.kill(shards[s].procs[l]);
        kills += 1;
        println!(
            "{:.1} s: killed shard {s}'s leader (member {})",
            t0.elapsed().as_secs_f64(),
            l + 1
        );
        l
    };
    at(0.5);
    let stepped = shards[0].leader().expect("a leader of shard 0");
    for (t, secs) in [(0.5, 30), (0.9, -30), (1.3, 0)] {
        at(t);
        inject::set_clock(&clock(stepped + 1), secs);
        println!(
            "{:.1} s: shard 0's leader (member {}) clock at {secs:+} s",
            t0.elapsed().as_secs_f64(),
            stepped + 1
        );
    }
    at(1.5);
    let l0 = kill_leader(&mut procs, 0);
    at(2.2);
    // A proxy dies with transactions in flight: the coordinator has the
    // shards deliver the ones below its failure timestamp and discard the
    // rest, everywhere alike.
    procs.kill(proxies[PROXIES - 1]);
    println!(
        "{:.1} s: killed proxy {}",
        t0.elapsed().as_secs_f64(),
        PROXIES - 1
    );
    at(3.0);
    let p = procs.start(
        &format!("s0n{}", l0 + 1),
        &mut member(&shards[0], 0, l0 + 1),
    );
    faked.0.extend(procs.pid(p));
    // A leader paused past its election timeout (140-280 ms), then
    // resumed: it must step down, not serve as leader on resumption.
    at(3.1);
    let paused = shards[1].leader().expect("a leader of shard 1");
    procs.signal(shards[1].procs[paused], libc::SIGSTOP);
    println!(
        "{:.1} s: paused shard 1's leader (member {})",
        t0.elapsed().as_secs_f64(),
        paused + 1
    );
    at(4.2);
    procs.signal(shards[1].procs[paused], libc::SIGCONT);
    println!("{:.1} s: resumed it", t0.elapsed().as_secs_f64());
    at(4.5);
    let l1 = kill_leader(&mut procs, 1);
    at(6.0);
    procs.start(&format!("s1n{}", l1 + 1), &mut shards[1].command(l1 + 1));
    at(7.5);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("client");
    }

    // Every key, read in one ordered transaction once nothing runs.
    let mut finals = None;
    for _ in 0..50 {
        let mut c = Conn::open(fronts[1]);
        let mut cmds = vec![vec!["MULTI".to_string()]];
        for k in &ks {
            cmds.push(vec!["LRANGE".into(), k.clone(), "0".into(), "-1".into()]);
        }
        cmds.push(vec!["EXEC".into()]);
        let r = c.try_pipeline(&cmds).and_then(|mut r| r.pop());
        if let Some(Reply::Array(Some(items))) = r {
            let lists: Option<Vec<Vec<u64>>> = items.iter().map(list).collect();
            if let Some(l) = lists {
                finals = Some(ks.iter().cloned().zip(l).collect::<BTreeMap<_, _>>());
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let finals = finals.expect("a final read of every key");
    let history = history.lock().expect("lock").clone();
    let count = |o: TxnOutcome| history.iter().filter(|t| t.outcome == o).count();
    let cross = history
        .iter()
        .filter(|t| t.outcome == TxnOutcome::Committed)
        .filter(|t| {
            let mut s: Vec<u32> = t
                .appends
                .iter()
                .chain(t.reads.iter().map(|(k, _)| k))
                .map(|k| shard_of(k.as_bytes(), SHARDS))
                .collect();
            s.dedup();
            s.sort();
            s.dedup();
            s.len() > 1
        })
        .count();
    println!(
        "{} transactions: {} committed ({cross} across both shards), {} failed, {} unknown; {kills} leader kills",
        history.len(),
        count(TxnOutcome::Committed),
        count(TxnOutcome::Failed),
        count(TxnOutcome::Unknown),
    );
    // Strictly: the shards wait out the skew bound, so the order follows
    // real time too.
    let summary = check_strict_serializable(&history, &finals)
        .unwrap_or_else(|bad| panic!("not strictly serializable or not atomic: {bad:?}"));
    println!("strictly serializable: {summary:?}");
    let unknown_applied = history
        .iter()
        .filter(|t| t.outcome == TxnOutcome::Unknown)
        .filter(|t| t.appends.iter().all(|k| finals[k].contains(&t.id)))
        .count();
    println!("unknown outcomes: {unknown_applied} applied on every shard, the rest on none",);
    assert!(
        cross >= 20,
        "too few cross-shard transactions committed: {cross}"
    );

    // The forged part was never applied.
    let mut c = Conn::open(fronts[0]);
    assert_eq!(c.cmd(&["GET", &forged_key]), Reply::Bulk(None));

    // Each applier met its leader's death (a lost reply or a refused
    // connection, resolved through the marker key).
    for (s, &a) in appliers.iter().enumerate() {
        let v = procs.terminate(a);
        println!("txn-shard {s}: {v}");
        assert!(
            v["retries"].as_u64().unwrap_or(0) >= 1,
            "shard {s} saw no failover: {v}"
        );
        assert_eq!(v["malformed"], 0, "{v}");
        // Only the forged part failed the MAC check.
        let forged = if s == 0 { 3 } else { 0 };
        assert_eq!(v["unauthenticated"], forged, "shard {s}: {v}");
    }
    for (i, &p) in proxies.iter().enumerate().take(PROXIES - 1) {
        let v = procs.terminate(p);
        println!("txn-proxy {i}: {v}");
        assert_eq!(v["stray_replies"], 0, "{v}");
        assert_eq!(v["unauthenticated"], 0, "{v}");
        if i == 0 {
            assert!(v["rejected"].as_u64().unwrap_or(0) >= 1, "{v}");
        }
    }
    // The killed proxy's failure was recovered (by both replicas, each
    // running every step).
    for (i, &c) in coord_procs.iter().enumerate() {
        let v = procs.terminate(c);
        println!("coordinator {i}: {v}");
        assert_eq!(v["recovered"], 1, "{v}");
    }
    drop(procs);
    let _ = std::fs::remove_dir_all(&root);
}

/// Removes libfaketime's shared-memory pair of each process listed, once
/// the test ends (`inject::faketime_reaped`), however it ends.
struct FaketimeReaped(Vec<u32>);

impl Drop for FaketimeReaped {
    fn drop(&mut self) {
        for &pid in &self.0 {
            inject::faketime_reaped(pid);
        }
    }
}
