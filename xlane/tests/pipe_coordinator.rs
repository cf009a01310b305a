//! Reliable 1Pipe's recovery through the replicated coordinator, over
//! real processes on loopback: a `xlane pipe switchd --hold-silent` hop,
//! two `xlane pipe coordinator` replicas keeping their decision in a
//! three-member `xlane kv serve` group, and four 1Pipe processes (threads
//! of this test, each a `UdpEndpoint`) scattering reliable messages to
//! each other. The test kills one coordinator replica and the store's
//! leader, then stops process 4: the surviving replica must have its
//! failure timestamp decided through the store's new leader, every
//! correct process must get `proc_fail(4, t)` with the same `t`, the
//! hop must remove the link, and delivery must resume. Every process's
//! deliveries must be in one order, and each of process 4's scatterings
//! delivered by every correct receiver or by none.

mod common;

use common::procs::{Procs, Shard};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddrV4;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlane_pipe::udp::UdpEndpoint;
use xlane_pipe::{ReceiverConfig, SenderConfig};

const PROCS: u32 = 4;
const FAILS: u32 = 4;

/// What a process saw.
#[derive(Default, Debug)]
struct Seen {
    /// (ts, src, seq) in delivery order.
    delivered: Vec<(u64, u32, u64)>,
    /// proc_fail callbacks, in order.
    proc_fails: Vec<(u32, u64)>,
    /// Its own scatterings: (seq, ts).
    sent: Vec<(u64, u64)>,
}

fn process(
    me: u32,
    addrs: Vec<SocketAddrV4>,
    hop: SocketAddrV4,
    coordinators: Vec<SocketAddrV4>,
    stop: Arc<AtomicBool>,
) -> Seen {
    let peers: HashMap<u32, SocketAddrV4> = (1..=PROCS).zip(addrs.iter().copied()).collect();
    let mut ep = UdpEndpoint::bind(
        addrs[me as usize - 1],
        me,
        hop,
        peers,
        1_000_000,
        (SenderConfig::default(), ReceiverConfig::default()),
    )
    .expect("bind");
    ep.set_coordinators(coordinators);
    let mut seen = Seen::default();
    let mut seq = 0u64;
    let mut next = Instant::now();
    let mut excluded = false;
    while !stop.load(Ordering::Relaxed) && !excluded {
        ep.wait(Duration::from_millis(1)).expect("turn");
        if Instant::now() >= next {
            next += Duration::from_millis(3);
            seq += 1;
            let body = seq.to_be_bytes();
            let msgs: Vec<(u32, &[u8])> = (1..=PROCS)
                .filter(|&p| p != me && !seen.proc_fails.iter().any(|(f, _)| *f == p))
                .map(|p| (p, &body[..]))
                .collect();
            if let Ok(ts) = ep.scatter(&msgs, true) {
                seen.sent.push((seq, ts));
            }
        }
        while let Some(d) = ep.poll_deliver() {
            let s = u64::from_be_bytes(d.payload[..8].try_into().expect("8 bytes"));
            seen.delivered.push((d.ts, d.src, s));
        }
        while let Some((p, t)) = ep.poll_proc_fail() {
            seen.proc_fails.push((p, t));
            excluded |= p == me;
        }
        while ep.poll_event().is_some() {}
    }
    seen
}

#[test]
fn a_failed_process_is_recovered_by_the_replicated_coordinator() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let root =
        std::env::temp_dir().join(format!("xlane-pipe-coord-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&root).expect("dir");
    let bin = env!("CARGO_BIN_EXE_xlane");
    let mut procs = Procs::default();

    // The store.
    let mut store = Shard::new(&root, 0);
    for id in 1..=3 {
        let p = procs.start(&format!("store{id}"), &mut store.command(id));
        store.procs.push(p);
    }
    store.leader().expect("the store elects a leader");

    let addrs: Vec<SocketAddrV4> = xlane_testports::udp_n(PROCS as usize);
    let hop = xlane_testports::udp();
    let coords: Vec<SocketAddrV4> = xlane_testports::udp_n(2);
    let mut c_procs = Vec::new();
    for (i, c) in coords.iter().enumerate() {
        let mut cmd = Command::new(bin);
        cmd.args(["pipe", "coordinator", "--bind", &c.to_string()]);
        for m in &store.clients {
            cmd.args(["--store", &m.to_string()]);
        }
        for (p, a) in addrs.iter().enumerate() {
            cmd.args(["--process", &format!("{}={a}", p + 1)]);
        }
        c_procs.push(procs.start(&format!("coordinator{i}"), &mut cmd));
    }
    let mut sw = Command::new(bin);
    // 500 beacon intervals of silence (500 ms): far above the stalls of a
    // loaded 2-core machine, so that only the stopped process is found
    // silent.
    sw.args([
        "pipe",
        "switchd",
        "--bind",
        &hop.to_string(),
        "--hold-silent",
    ]);
    sw.args(["--beacon-us", "1000", "--dead-after", "500"]);
    for (p, a) in addrs.iter().enumerate() {
        sw.args([
            "--input",
            &a.to_string(),
            "--route",
            &format!("{}={a}", p + 1),
        ]);
    }
    for c in &coords {
        sw.args(["--coordinator", &c.to_string()]);
    }
    let hop_i = procs.start("switchd", &mut sw);

    let stops: Vec<Arc<AtomicBool>> = (0..PROCS)
        .map(|_| Arc::new(AtomicBool::new(false)))
        .collect();
    let threads: Vec<_> = (1..=PROCS)
        .map(|me| {
            let (addrs, coords, stop) = (
                addrs.clone(),
                coords.clone(),
                stops[me as usize - 1].clone(),
            );
            std::thread::spawn(move || process(me, addrs, hop, coords, stop))
        })
        .collect();

    let t0 = Instant::now();
    let at = |s: f64| {
        if let Some(w) = Duration::from_secs_f64(s).checked_sub(t0.elapsed()) {
            std::thread::sleep(w);
        }
    };
    at(0.5);
    procs.kill(c_procs[0]);
    let leader = store.leader().expect("a store leader");
    procs.kill(store.procs[leader]);
    println!(
        "killed coordinator 0 and the store's leader (member {})",
        leader + 1
    );
    at(0.8);
    stops[FAILS as usize - 1].store(true, Ordering::Relaxed);
    println!("stopped process {FAILS}");
    at(4.0);
    for s in &stops {
        s.store(true, Ordering::Relaxed);
    }
    let seen: Vec<Seen> = threads
        .into_iter()
        .map(|t| t.join().expect("process"))
        .collect();

    // Every correct process learned process 4's failure, once, at one t.
    let correct: Vec<u32> = (1..=PROCS).filter(|&p| p != FAILS).collect();
    let mut t_fail = None;
    for &p in &correct {
        let s = &seen[p as usize - 1];
        println!(
            "process {p}: {} sent, {} delivered, proc_fail {:?}",
            s.sent.len(),
            s.delivered.len(),
            s.proc_fails
        );
        assert_eq!(s.proc_fails.len(), 1, "process {p}: {:?}", s.proc_fails);
        let (f, t) = s.proc_fails[0];
        assert_eq!(f, FAILS, "process {p} was told of another failure");
        assert!(t_fail.map_or(true, |x| x == t), "two failure timestamps");
        t_fail = Some(t);
    }
    let t_fail = t_fail.expect("a failure timestamp");

    // One order: each process delivers by (ts, sender), strictly.
    for &p in &correct {
        let d = &seen[p as usize - 1].delivered;
        assert!(
            d.windows(2).all(|w| (w[0].0, w[0].1) < (w[1].0, w[1].1)),
            "process {p} delivered out of order"
        );
    }
    // Atomicity of the failed process's scatterings, and nothing of it
    // above the failure timestamp.
    let from_failed: Vec<BTreeSet<u64>> = correct
        .iter()
        .map(|&p| {
            seen[p as usize - 1]
                .delivered
                .iter()
                .filter(|d| d.1 == FAILS)
                .map(|d| {
                    assert!(
                        d.0 <= t_fail,
                        "process {p} delivered {d:?} above t_fail {t_fail}"
                    );
                    d.2
                })
                .collect()
        })
        .collect();
    for (i, set) in from_failed.iter().enumerate().skip(1) {
        assert_eq!(
            set, &from_failed[0],
            "process {} and process {} delivered different scatterings of process {FAILS}",
            correct[0], correct[i]
        );
    }
    assert!(
        !from_failed[0].is_empty(),
        "process {FAILS} delivered nothing before it stopped"
    );
    // Delivery resumed: each correct process delivered, after the
    // failure, messages from every other correct one.
    for &p in &correct {
        let after: BTreeMap<u32, usize> = seen[p as usize - 1]
            .delivered
            .iter()
            .filter(|d| d.0 > t_fail)
            .fold(BTreeMap::new(), |mut m, d| {
                *m.entry(d.1).or_default() += 1;
                m
            });
        for &q in correct.iter().filter(|&&q| q != p) {
            assert!(
                after.get(&q).copied().unwrap_or(0) > 10,
                "process {p} after recovery: {after:?}"
            );
        }
    }

    let c = procs.terminate(c_procs[1]);
    println!("coordinator 1: {c}");
    assert_eq!(c["recovered"], 1, "{c}");
    let h = procs.terminate(hop_i);
    println!("switchd: {h}");
    drop(procs);
    let _ = std::fs::remove_dir_all(&root);
}
