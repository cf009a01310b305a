//! 1Pipe over a fabric of real hop daemons, as the paper lays one out: two
//! racks, each switch split into an up hop and a down hop, and a spine
//! between them (five `xlane pipe switchd` processes on loopback). Two
//! processes per rack (threads of this test, each a `UdpEndpoint` sending
//! through its rack's up hop and delivered to by its down hop) scatter
//! reliable messages to all three others. Each barrier crosses three hops,
//! each taking the minimum over its inputs. Every receiver must deliver
//! every message sent to it, once, in (timestamp, sender) order.

mod common;

use common::procs::Procs;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddrV4;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use xlane_pipe::udp::UdpEndpoint;
use xlane_pipe::{ReceiverConfig, SenderConfig};

const RACKS: usize = 2;
const PER_RACK: usize = 2;

fn switchd(
    procs: &mut Procs,
    name: &str,
    bind: SocketAddrV4,
    inputs: &[SocketAddrV4],
    routes: &[(u32, SocketAddrV4)],
) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xlane"));
    c.args(["pipe", "switchd", "--bind", &bind.to_string()]);
    // Silent after 2 s: nothing here fails.
    c.args(["--beacon-us", "500", "--dead-after", "4000"]);
    for i in inputs {
        c.args(["--input", &i.to_string()]);
    }
    for (p, a) in routes {
        c.args(["--route", &format!("{p}={a}")]);
    }
    procs.start(name, &mut c);
}

#[test]
fn scatterings_cross_a_fabric_of_hops_in_one_order() {
    let n = RACKS * PER_RACK;
    let addrs: Vec<SocketAddrV4> = xlane_testports::udp_n(n);
    let rack = |p: usize| p / PER_RACK;
    let up: Vec<SocketAddrV4> = xlane_testports::udp_n(RACKS);
    let down: Vec<SocketAddrV4> = xlane_testports::udp_n(RACKS);
    let spine = xlane_testports::udp();
    let mut procs = Procs::default();
    // Down hops: from the spine to their rack's processes.
    for (r, &d) in down.iter().enumerate() {
        let routes: Vec<(u32, SocketAddrV4)> = (0..n)
            .filter(|&p| rack(p) == r)
            .map(|p| (p as u32, addrs[p]))
            .collect();
        switchd(&mut procs, &format!("down{r}"), d, &[spine], &routes);
    }
    // The spine: from the up hops to the down hop of each process's rack.
    let routes: Vec<(u32, SocketAddrV4)> = (0..n).map(|p| (p as u32, down[rack(p)])).collect();
    switchd(&mut procs, "spine", spine, &up, &routes);
    // Up hops: from their rack's processes, everything to the spine.
    for (r, &u) in up.iter().enumerate() {
        let inputs: Vec<SocketAddrV4> =
            (0..n).filter(|&p| rack(p) == r).map(|p| addrs[p]).collect();
        let routes: Vec<(u32, SocketAddrV4)> = (0..n).map(|p| (p as u32, spine)).collect();
        switchd(&mut procs, &format!("up{r}"), u, &inputs, &routes);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let peers: HashMap<u32, SocketAddrV4> = addrs
        .iter()
        .enumerate()
        .map(|(p, a)| (p as u32, *a))
        .collect();
    let threads: Vec<_> = (0..n)
        .map(|p| {
            let (peers, stop, me, hop, downlink) = (
                peers.clone(),
                stop.clone(),
                addrs[p],
                up[rack(p)],
                down[rack(p)],
            );
            std::thread::spawn(move || {
                let mut ep = UdpEndpoint::bind(
                    me,
                    p as u32,
                    hop,
                    peers,
                    500_000,
                    (SenderConfig::default(), ReceiverConfig::default()),
                )
                .expect("bind");
                ep.set_downlink(downlink);
                let mut sent = Vec::new();
                let mut got = Vec::new();
                let start = Instant::now();
                let mut next = start;
                while !stop.load(Ordering::Relaxed) {
                    ep.wait(Duration::from_millis(1)).expect("turn");
                    // Two seconds of sending, then only receiving.
                    if Instant::now() >= next && start.elapsed() < Duration::from_secs(2) {
                        next += Duration::from_millis(4);
                        let to: Vec<u32> = (0..n as u32).filter(|&q| q != p as u32).collect();
                        let msgs: Vec<(u32, &[u8])> = to.iter().map(|&q| (q, &b"m"[..])).collect();
                        sent.push(ep.scatter(&msgs, true).expect("scatter"));
                    }
                    while let Some(d) = ep.poll_deliver() {
                        got.push((d.ts, d.src));
                    }
                    while ep.poll_event().is_some() {}
                }
                (sent, got)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(4));
    stop.store(true, Ordering::Relaxed);
    // Each process: its scatterings' timestamps, its deliveries.
    type Seen = (Vec<u64>, Vec<(u64, u32)>);
    let out: Vec<Seen> = threads
        .into_iter()
        .map(|t| t.join().expect("process"))
        .collect();

    for (p, (_, got)) in out.iter().enumerate() {
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "process {p} delivered out of order or twice"
        );
        let want: BTreeSet<(u64, u32)> = out
            .iter()
            .enumerate()
            .filter(|&(q, _)| q != p)
            .flat_map(|(q, (sent, _))| sent.iter().map(move |&ts| (ts, q as u32)))
            .collect();
        let have: BTreeSet<(u64, u32)> = got.iter().copied().collect();
        assert_eq!(
            have.len(),
            want.len(),
            "process {p}: {} of {} messages delivered",
            have.len(),
            want.len()
        );
        assert_eq!(have, want, "process {p}");
        println!("process {p}: {} messages delivered in order", got.len());
    }
    for name in ["up0", "up1", "spine", "down0", "down1"] {
        let i = procs
            .children
            .iter()
            .position(|(n, _)| n == name)
            .expect("started");
        let v = procs.terminate(i);
        assert_eq!(v["refused"], 0, "{name}: {v}");
        println!("{name}: {v}");
    }
}
