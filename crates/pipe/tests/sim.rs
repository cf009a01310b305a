//! The 1Pipe cores in a seeded simulated datacenter: processes in racks,
//! each rack's ToR split into an up and a down hop, spines between them,
//! every packet up to a spine picked at random (multipath) and down again.
//! Links are FIFO with random delays; data packets are lost at random on
//! the hosts' uplinks; process clocks are skewed. Some setups also
//! duplicate data packets on the uplinks and let packets on any link skip
//! ahead of FIFO order (a hop drops a packet whose barrier went back; a
//! receiver NAKs one that came late). Hops forward the minimum barrier of
//! their input links and send beacons on idle outputs. A process may
//! crash, or only stall long enough to be found silent and then speak
//! again; the "controller" recovers some time after the hop's report,
//! and until then the hop fences the silent link.
//!
//! With `lane`, the processes' beacons and the down hops' beacons to their
//! processes take a faster path of their own (the express lane), capped
//! by a [`BarrierCap`] over a window `W`, and taken by maximum: they
//! overtake data sent just before them. With `W` above the data path's
//! delay nothing is overtaken; with `W` = 0 overtaken data is dropped
//! (best effort: reported; reliable: sent again), never misordered.
//!
//! Checked at every receiver: delivery in (timestamp, sender) order, so no
//! two receivers disagree (ordering violations must be 0); best effort:
//! every message delivered or reported failed, exactly once; reliable:
//! every message delivered exactly once despite losses; a crashed process
//! in reliable mode: each of its scatterings delivered by every correct
//! receiver or by none (atomicity), and delivery resumes.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use xlane_lane::sim::SimRng;
use xlane_pipe::lane::BarrierCap;
use xlane_pipe::wire::{Header, Kind};
use xlane_pipe::{
    AggConfig, AggError, AggEvent, Aggregator, Delivery, Receiver, ReceiverConfig, SendEvent,
    Sender, SenderConfig,
};

const US: u64 = 1_000;
const BEACON: u64 = 20 * US;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Node {
    Host(u32),
    TorUp(u32),
    Spine(u32),
    TorDown(u32),
}

struct Setup {
    procs: u32,
    racks: u32,
    spines: u32,
    loss: f64,
    reliable: bool,
    scatterings: u32,
    /// Process that crashes, and when.
    crash: Option<(u32, u64)>,
    /// Instead of crashing, that process stalls this long, then runs on.
    stall: Option<u64>,
    /// Chance a data packet on an uplink is sent twice.
    dup: f64,
    /// Chance a packet on any link skips ahead of FIFO order.
    reorder: f64,
    /// Beacons to and from processes on the lane, capped over this
    /// window (ns).
    lane: Option<u64>,
    seed: u64,
}

impl Setup {
    /// 8 processes in 2 racks, 2 spines; no crash, copy or reordering.
    fn new(reliable: bool, loss: f64, scatterings: u32, seed: u64) -> Setup {
        Setup {
            procs: 8,
            racks: 2,
            spines: 2,
            loss,
            reliable,
            scatterings,
            crash: None,
            stall: None,
            dup: 0.0,
            reorder: 0.0,
            lane: None,
            seed,
        }
    }
}

/// From the hop's report of a silent link to the controller's recovery.
const RECOVERY_DELAY: u64 = 300 * US;

#[derive(Clone, Debug)]
enum Ev {
    /// A packet arrives at `to` over the link from `from`.
    Arrive {
        from: Node,
        to: Node,
        h: Header,
        payload: Vec<u8>,
    },
    /// A reply (ACK/NAK) reaches a sender out of band.
    Reply {
        to: u32,
        h: Header,
    },
    Tick,
    Scatter(u32),
    /// A lane beacon arrives at `to` from `from`.
    Lane {
        from: Node,
        to: Node,
        barrier: u64,
        commit: u64,
    },
    /// The controller recovers from the silent link `link` of `hop`.
    Recover {
        hop: Node,
        link: u32,
        commit: u64,
    },
}

struct World {
    s: Setup,
    rng: SimRng,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: HashMap<u64, Ev>,
    /// Last arrival time per link (FIFO).
    last_arrival: HashMap<(Node, Node), u64>,
    aggs: BTreeMap<Node, Aggregator>,
    senders: Vec<Sender>,
    receivers: Vec<Receiver>,
    skew: Vec<u64>,
    host_sent: Vec<u64>,
    delivered: Vec<Vec<Delivery>>,
    failed: HashSet<(u64, u32, u32)>,
    /// Every message sent: (ts, src, dst).
    sent: HashSet<(u64, u32, u32)>,
    scatterings: BTreeMap<(u64, u32), Vec<u32>>,
    crashed: Option<u32>,
    /// The crash has been detected and recovered from.
    recovered: bool,
    /// A stalled process, frozen until the time given.
    stalled: Option<(u32, u64)>,
    /// Packets a hop dropped: from a fenced (silent, held) link, or with a
    /// barrier that went back (reordered).
    fenced_drops: u64,
    backwards_drops: u64,
    left: Vec<u32>,
    /// Lane mode: the cap of each process and down hop, and when each
    /// last sent a lane beacon.
    caps: HashMap<Node, BarrierCap>,
    lane_sent: HashMap<Node, u64>,
    lane_beacons: u64,
}

fn rack(s: &Setup, p: u32) -> u32 {
    p % s.racks
}

fn link_id(n: Node) -> u32 {
    match n {
        Node::Host(p) => p,
        Node::TorUp(t) => 1000 + t,
        Node::Spine(x) => 2000 + x,
        Node::TorDown(t) => 3000 + t,
    }
}

impl World {
    fn new(s: Setup) -> World {
        let cfg = AggConfig {
            beacon_interval_ns: BEACON,
            dead_after: 10,
            hold_silent: s.reliable,
        };
        let mut aggs = BTreeMap::new();
        for t in 0..s.racks {
            let mut up = Aggregator::new(cfg);
            for p in (0..s.procs).filter(|&p| rack(&s, p) == t) {
                up.add_input(link_id(Node::Host(p)), 0).unwrap();
            }
            for x in 0..s.spines {
                up.add_output(link_id(Node::Spine(x)), 0).unwrap();
            }
            aggs.insert(Node::TorUp(t), up);
            let mut down = Aggregator::new(cfg);
            for x in 0..s.spines {
                down.add_input(link_id(Node::Spine(x)), 0).unwrap();
            }
            for p in (0..s.procs).filter(|&p| rack(&s, p) == t) {
                down.add_output(link_id(Node::Host(p)), 0).unwrap();
            }
            aggs.insert(Node::TorDown(t), down);
        }
        for x in 0..s.spines {
            let mut sp = Aggregator::new(cfg);
            for t in 0..s.racks {
                sp.add_input(link_id(Node::TorUp(t)), 0).unwrap();
                sp.add_output(link_id(Node::TorDown(t)), 0).unwrap();
            }
            aggs.insert(Node::Spine(x), sp);
        }
        let mut rng = SimRng::new(s.seed);
        let n = s.procs as usize;
        let skew = (0..n).map(|_| rng.range(0, 3 * US)).collect();
        let mut w = World {
            rng,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            last_arrival: HashMap::new(),
            aggs,
            senders: (0..s.procs)
                .map(|p| {
                    Sender::new(
                        p,
                        SenderConfig {
                            ack_timeout_ns: 5_000 * US,
                            rto_ns: 500 * US,
                            max_outstanding: 1 << 20,
                        },
                    )
                })
                .collect(),
            receivers: (0..s.procs)
                .map(|p| Receiver::new(p, ReceiverConfig::default()))
                .collect(),
            skew,
            host_sent: vec![0; n],
            delivered: vec![Vec::new(); n],
            failed: HashSet::new(),
            sent: HashSet::new(),
            scatterings: BTreeMap::new(),
            crashed: None,
            recovered: false,
            stalled: None,
            fenced_drops: 0,
            backwards_drops: 0,
            left: vec![s.scatterings; n],
            caps: HashMap::new(),
            lane_sent: HashMap::new(),
            lane_beacons: 0,
            s,
        };
        if let Some(window) = w.s.lane {
            for p in 0..w.s.procs {
                w.caps.insert(Node::Host(p), BarrierCap::new(window));
            }
            for t in 0..w.s.racks {
                w.caps.insert(Node::TorDown(t), BarrierCap::new(window));
            }
        }
        w.at(0, Ev::Tick);
        for p in 0..w.s.procs {
            let t = w.rng.range(0, 10 * US);
            w.at(t, Ev::Scatter(p));
        }
        w
    }

    fn at(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.insert(self.seq, ev);
        self.queue.push(Reverse((t, self.seq)));
    }

    /// Sends over the link `from → to`: FIFO, 2–5 µs (or, by chance, out
    /// of order: 1–20 µs, ahead of what is queued).
    fn send(&mut self, from: Node, to: Node, h: Header, payload: Vec<u8>) {
        let t = if self.rng.chance(self.s.reorder) {
            self.now + self.rng.range(US, 20 * US)
        } else {
            let t = self.now + self.rng.range(2 * US, 5 * US);
            let last = self.last_arrival.entry((from, to)).or_insert(0);
            let t = t.max(*last);
            *last = t;
            t
        };
        self.at(
            t,
            Ev::Arrive {
                from,
                to,
                h,
                payload,
            },
        );
    }

    fn clock(&self, p: u32) -> u64 {
        self.now + self.skew[p as usize]
    }

    fn alive(&self, p: u32) -> bool {
        self.crashed != Some(p)
    }

    /// Alive and not stalled right now.
    fn running(&self, p: u32) -> bool {
        self.alive(p) && !matches!(self.stalled, Some((q, until)) if q == p && self.now < until)
    }

    fn host_out(&mut self, p: u32) {
        while let Some(o) = self.senders[p as usize].poll_transmit() {
            let data = o.header.kind == Kind::Data;
            let lossy = data && self.rng.chance(self.s.loss);
            self.host_sent[p as usize] = self.now;
            if let Some(cap) = self.caps.get_mut(&Node::Host(p)) {
                cap.on_regular_sent(self.now, o.header.barrier, o.header.commit);
            }
            if !lossy {
                let up = Node::TorUp(rack(&self.s, p));
                if data && self.rng.chance(self.s.dup) {
                    self.send(Node::Host(p), up, o.header, o.payload.clone());
                }
                self.send(Node::Host(p), up, o.header, o.payload);
            }
        }
    }

    fn run(&mut self) {
        while let Some(Reverse((t, id))) = self.queue.pop() {
            self.now = t;
            let ev = self.events.remove(&id).unwrap();
            match ev {
                Ev::Scatter(p) => self.scatter(p),
                Ev::Tick => {
                    if self.tick() {
                        self.at(self.now + BEACON / 2, Ev::Tick);
                    }
                }
                Ev::Reply { to, h } => {
                    if self.running(to) {
                        self.senders[to as usize].on_reply(&h);
                    }
                }
                Ev::Recover { hop, link, commit } => self.recover(hop, link, commit),
                Ev::Lane {
                    from,
                    to,
                    barrier,
                    commit,
                } => self.lane_arrive(from, to, barrier, commit),
                Ev::Arrive {
                    from,
                    to,
                    h,
                    payload,
                } => self.arrive(from, to, h, payload),
            }
        }
    }

    fn scatter(&mut self, p: u32) {
        if !self.alive(p) || self.left[p as usize] == 0 {
            return;
        }
        if let Some((q, until)) = self.stalled {
            if q == p && self.now < until {
                self.at(until, Ev::Scatter(p));
                return;
            }
        }
        if let Some((cp, at)) = self.s.crash {
            if cp == p && self.now >= at && self.stalled.is_none() {
                match self.s.stall {
                    Some(d) => {
                        self.stalled = Some((p, self.now + d));
                        self.at(self.now + d, Ev::Scatter(p));
                    }
                    None => self.crashed = Some(p),
                }
                return;
            }
        }
        self.left[p as usize] -= 1;
        let k = self.rng.range(1, 3) as usize;
        let mut dsts: Vec<u32> = Vec::new();
        while dsts.len() < k {
            let d = self.rng.below(self.s.procs as u64) as u32;
            // After recovery nobody sends to the failed process.
            let known_failed = self.recovered && self.crashed == Some(d);
            if !dsts.contains(&d) && !known_failed {
                dsts.push(d);
            }
        }
        let bodies: Vec<Vec<u8>> = dsts
            .iter()
            .map(|d| format!("{p}->{d}").into_bytes())
            .collect();
        let msgs: Vec<(u32, &[u8])> = dsts
            .iter()
            .zip(&bodies)
            .map(|(d, b)| (*d, &b[..]))
            .collect();
        let now = self.clock(p);
        let ts = self.senders[p as usize]
            .scatter(now, &msgs, self.s.reliable)
            .unwrap();
        for &d in &dsts {
            assert!(self.sent.insert((ts, p, d)), "(ts, src) reused");
        }
        self.scatterings.insert((ts, p), dsts);
        self.host_out(p);
        let next = self.now + self.rng.range(5 * US, 40 * US);
        self.at(next, Ev::Scatter(p));
    }

    /// Timers of every hop and host; false once everything is quiet.
    fn tick(&mut self) -> bool {
        let now = self.now;
        let nodes: Vec<Node> = self.aggs.keys().copied().collect();
        for n in nodes {
            let a = self.aggs.get_mut(&n).unwrap();
            a.handle_timeout(now);
            let mut silent = Vec::new();
            while let Some(e) = a.poll_event() {
                if let AggEvent::LinkSilent { link, commit, .. } = e {
                    silent.push((link, commit));
                }
            }
            let mut beacons = Vec::new();
            while let Some(o) = a.poll_beacon(now) {
                beacons.push((o, a.barriers()));
            }
            for (link, commit) in silent {
                if self.s.reliable {
                    // Reliable: the link stays fenced until the
                    // controller is done.
                    let t = self.now + RECOVERY_DELAY;
                    self.at(
                        t,
                        Ev::Recover {
                            hop: n,
                            link,
                            commit,
                        },
                    );
                } else {
                    self.recover(n, link, commit);
                }
            }
            for (o, (b, c)) in beacons {
                let to = self.node_of_output(n, o);
                if matches!(n, Node::TorDown(_)) && self.s.lane.is_some() {
                    // On the lane instead (below).
                    continue;
                }
                self.send(n, to, Header::beacon(0, b, c), Vec::new());
            }
            if let (Node::TorDown(t), Some(_)) = (n, self.s.lane) {
                let (b, c) = self.aggs[&n].barriers();
                let procs: Vec<u32> = (0..self.s.procs)
                    .filter(|&p| rack(&self.s, p) == t)
                    .collect();
                for p in procs {
                    self.lane_send(n, Node::Host(p), b, c);
                }
            }
        }
        for p in 0..self.s.procs {
            if !self.running(p) {
                continue;
            }
            let c = self.clock(p);
            self.senders[p as usize].handle_timeout(c);
            self.host_out(p);
            if self.s.lane.is_some() {
                let h = self.senders[p as usize].beacon(c);
                let up = Node::TorUp(rack(&self.s, p));
                self.lane_send(Node::Host(p), up, h.barrier, h.commit);
            } else if self.now.saturating_sub(self.host_sent[p as usize]) >= BEACON {
                let h = self.senders[p as usize].beacon(c);
                self.host_sent[p as usize] = self.now;
                let up = Node::TorUp(rack(&self.s, p));
                self.send(Node::Host(p), up, h, Vec::new());
            }
        }
        let busy = self
            .left
            .iter()
            .enumerate()
            .any(|(p, &l)| l > 0 && self.alive(p as u32))
            || self
                .senders
                .iter()
                .enumerate()
                .any(|(p, s)| self.alive(p as u32) && s.outstanding() > 0)
            || self
                .receivers
                .iter()
                .enumerate()
                .any(|(p, r)| self.alive(p as u32) && r.held() > 0);
        busy && self.now < 10_000_000 * US
    }

    /// A lane beacon from `from` (a process, or a down hop to each of its
    /// processes) every beacon interval, capped: 1–2 µs, not FIFO with
    /// the data path's 2–5 µs.
    fn lane_send(&mut self, from: Node, to: Node, barrier: u64, commit: u64) {
        let last = self.lane_sent.get(&from).copied();
        if last.is_some_and(|t| self.now.saturating_sub(t) < BEACON && t != self.now) {
            return;
        }
        self.lane_sent.insert(from, self.now);
        let (barrier, commit) = self.caps[&from].cap(self.now, barrier, commit);
        self.lane_beacons += 1;
        let t = self.now + self.rng.range(US, 2 * US);
        self.at(
            t,
            Ev::Lane {
                from,
                to,
                barrier,
                commit,
            },
        );
    }

    fn lane_arrive(&mut self, from: Node, to: Node, barrier: u64, commit: u64) {
        match to {
            Node::Host(p) => {
                if !self.running(p) {
                    return;
                }
                let r = &mut self.receivers[p as usize];
                r.on_barriers(barrier, commit);
                while let Some(d) = r.poll_deliver(self.now) {
                    self.delivered[p as usize].push(d);
                }
            }
            hop => {
                let a = self.aggs.get_mut(&hop).unwrap();
                match a.on_beacon(link_id(from), barrier, commit, self.now) {
                    Ok(_) | Err(AggError::UnknownLink(_)) => {}
                    Err(AggError::Fenced(_)) => self.fenced_drops += 1,
                    Err(e) => panic!("{hop:?} from {from:?}: {e}"),
                }
            }
        }
    }

    /// The crashed process's uplink fell silent: the "controller" takes
    /// its failure timestamp (the last commit barrier its link carried),
    /// has every correct process discard and abort, then removes the link.
    fn recover(&mut self, hop: Node, link: u32, commit: u64) {
        let Some(p) = self.crashed.or(self.stalled.map(|(q, _)| q)) else {
            panic!("link {link} at {hop:?} silent without a crash");
        };
        assert_eq!((hop, link), (Node::TorUp(rack(&self.s, p)), p));
        // A stalled process is out from now on (fenced), like a crashed one.
        self.crashed = Some(p);
        if !self.s.reliable {
            // Best effort: the hop removed the link itself; senders learn
            // of their lost messages from missing ACKs.
            self.recovered = true;
            return;
        }
        for q in 0..self.s.procs {
            if q != p {
                self.receivers[q as usize].discard(p, commit);
                let c = self.clock(q);
                self.senders[q as usize].proc_failed(p, c);
                self.host_out(q);
            }
        }
        self.aggs.get_mut(&hop).unwrap().remove_input(link).unwrap();
        self.recovered = true;
    }

    fn node_of_output(&self, n: Node, o: u32) -> Node {
        match n {
            Node::TorUp(_) => Node::Spine(o - 2000),
            Node::Spine(_) => Node::TorDown(o - 3000),
            Node::TorDown(_) => Node::Host(o),
            Node::Host(_) => unreachable!(),
        }
    }

    fn arrive(&mut self, from: Node, to: Node, mut h: Header, payload: Vec<u8>) {
        match to {
            Node::Host(p) => {
                if !self.running(p) {
                    return;
                }
                self.receivers[p as usize]
                    .on_packet(&h, &payload, self.now)
                    .unwrap();
                while let Some(r) = self.receivers[p as usize].poll_reply() {
                    let t = self.now + self.rng.range(5 * US, 15 * US);
                    let to = r.dst;
                    self.at(t, Ev::Reply { to, h: r });
                }
                while let Some(d) = self.receivers[p as usize].poll_deliver(self.now) {
                    self.delivered[p as usize].push(d);
                }
            }
            hop => {
                let a = self.aggs.get_mut(&hop).unwrap();
                let (b, c) = match a.on_packet(link_id(from), h.barrier, h.commit, self.now) {
                    Ok(bc) => bc,
                    // A packet from a link already removed (the crashed
                    // host's last packets): dropped.
                    Err(AggError::UnknownLink(_)) if self.crashed.is_some() => return,
                    Err(AggError::Fenced(_)) => {
                        self.fenced_drops += 1;
                        return;
                    }
                    Err(AggError::Backwards { .. })
                        if self.s.reorder > 0.0 || self.s.lane.is_some() =>
                    {
                        self.backwards_drops += 1;
                        return;
                    }
                    Err(e) => panic!("{hop:?} from {from:?}: {e}"),
                };
                if h.kind == Kind::Beacon {
                    return;
                }
                h.barrier = b;
                h.commit = c;
                if let Some(cap) = self.caps.get_mut(&hop) {
                    cap.on_regular_sent(self.now, b, c);
                }
                let next = match hop {
                    Node::TorUp(_) => Node::Spine(self.rng.below(self.s.spines as u64) as u32),
                    Node::Spine(_) => Node::TorDown(rack(&self.s, h.dst)),
                    Node::TorDown(_) => Node::Host(h.dst),
                    Node::Host(_) => unreachable!(),
                };
                self.aggs
                    .get_mut(&hop)
                    .unwrap()
                    .on_sent(link_id(next), self.now);
                self.send(hop, next, h, payload);
            }
        }
    }

    fn collect_failures(&mut self) {
        for p in 0..self.s.procs {
            while let Some(SendEvent::Failed { ts, dst, .. }) =
                self.senders[p as usize].poll_event()
            {
                assert!(self.failed.insert((ts, p, dst)), "reported twice");
            }
        }
    }
}

/// Deliveries in (timestamp, sender) order at every receiver, each kind.
fn ordering_violations(w: &World) -> usize {
    // With FIFO links, correct barriers and no lane beacon that overtook
    // data, no message is ever late.
    if w.s.reorder == 0.0 && w.backwards_drops == 0 && !matches!(w.s.lane, Some(0)) {
        for r in &w.receivers {
            assert_eq!(r.stats().late, 0, "a message came below the barrier");
        }
    }
    let mut bad = 0;
    for ds in &w.delivered {
        for kind in [false, true] {
            let keys: Vec<(u64, u32)> = ds
                .iter()
                .filter(|d| d.reliable == kind)
                .map(|d| (d.ts, d.src))
                .collect();
            bad += keys.windows(2).filter(|w| w[0] >= w[1]).count();
        }
    }
    bad
}

fn delivered_set(w: &World) -> HashMap<(u64, u32, u32), usize> {
    let mut m = HashMap::new();
    for (p, ds) in w.delivered.iter().enumerate() {
        for d in ds {
            assert_eq!(d.payload, format!("{}->{}", d.src, p).into_bytes());
            *m.entry((d.ts, d.src, p as u32)).or_insert(0) += 1;
        }
    }
    m
}

fn run(s: Setup) -> World {
    let mut w = World::new(s);
    w.run();
    w.collect_failures();
    w
}

#[test]
fn best_effort_orders_everything_and_reports_every_loss() {
    for seed in 1..=3 {
        let w = run(Setup::new(false, 0.01, 5_000, seed));
        assert_eq!(ordering_violations(&w), 0, "seed {seed}");
        let got = delivered_set(&w);
        assert!(
            got.values().all(|&n| n == 1),
            "seed {seed}: delivered twice"
        );
        // Every message delivered or reported failed, never both.
        for m in &w.sent {
            let d = got.contains_key(m);
            let f = w.failed.contains(m);
            assert!(d != f, "seed {seed}: {m:?} delivered {d} failed {f}");
        }
        let lost = w.failed.len() as f64 / w.sent.len() as f64;
        assert!(lost > 0.0 && lost < 0.05, "seed {seed}: {lost}");
    }
}

#[test]
fn reliable_delivers_every_message_once_despite_loss() {
    for seed in 1..=3 {
        let w = run(Setup::new(true, 0.02, 3_000, seed));
        assert_eq!(ordering_violations(&w), 0, "seed {seed}");
        let got = delivered_set(&w);
        assert!(w.failed.is_empty(), "seed {seed}: {:?}", w.failed.len());
        for m in &w.sent {
            assert_eq!(got.get(m), Some(&1), "seed {seed}: {m:?}");
        }
        assert!(w.senders.iter().map(|s| s.stats().retransmits).sum::<u64>() > 0);
    }
}

#[test]
fn a_crashed_process_s_scatterings_are_all_or_nothing_and_delivery_resumes() {
    for seed in 1..=3 {
        let crashed = 3;
        let w = run(Setup {
            crash: Some((crashed, 4_000 * US)),
            ..Setup::new(true, 0.02, 2_000, seed)
        });
        assert_eq!(w.crashed, Some(crashed), "seed {seed}");
        assert_all_or_nothing(&w, crashed, seed);
    }
}

/// Every scattering reached all of its correct receivers or none; those
/// not involving the failed process reached all; every correct process
/// finished (delivery resumed after the failure).
fn assert_all_or_nothing(w: &World, failed: u32, seed: u64) {
    assert_eq!(ordering_violations(w), 0, "seed {seed}");
    let got = delivered_set(w);
    assert!(
        got.values().all(|&n| n == 1),
        "seed {seed}: delivered twice"
    );
    for ((ts, src), dsts) in &w.scatterings {
        let correct: Vec<u32> = dsts.iter().copied().filter(|&d| d != failed).collect();
        let n = correct
            .iter()
            .filter(|&&d| got.contains_key(&(*ts, *src, d)))
            .count();
        assert!(
            n == 0 || n == correct.len(),
            "seed {seed}: scattering ({ts}, {src}) reached {n} of {correct:?}"
        );
        if *src != failed && !dsts.contains(&failed) {
            assert_eq!(n, correct.len(), "seed {seed}: ({ts}, {src}) not delivered");
        }
    }
    for p in (0..w.s.procs).filter(|&p| p != failed) {
        assert_eq!(w.left[p as usize], 0, "seed {seed}: process {p}");
    }
}

#[test]
fn copies_and_reordering_never_break_the_order() {
    for seed in 1..=3 {
        let be = run(Setup {
            dup: 0.02,
            reorder: 0.02,
            ..Setup::new(false, 0.01, 3_000, seed)
        });
        assert_eq!(ordering_violations(&be), 0, "seed {seed}");
        let got = delivered_set(&be);
        assert!(
            got.values().all(|&n| n == 1),
            "seed {seed}: delivered twice"
        );
        for m in &be.sent {
            let d = got.contains_key(m);
            let f = be.failed.contains(m);
            assert!(d != f, "seed {seed}: {m:?} delivered {d} failed {f}");
        }
        let dups: u64 = be.receivers.iter().map(|r| r.stats().duplicates).sum();
        assert!(dups > 0, "seed {seed}: no copy reached a receiver");
        assert!(be.backwards_drops > 0, "seed {seed}: nothing reordered");

        let rel = run(Setup {
            dup: 0.02,
            reorder: 0.02,
            ..Setup::new(true, 0.01, 2_000, seed)
        });
        assert_eq!(ordering_violations(&rel), 0, "seed {seed}");
        let got = delivered_set(&rel);
        assert!(rel.failed.is_empty(), "seed {seed}");
        for m in &rel.sent {
            assert_eq!(got.get(m), Some(&1), "seed {seed}: {m:?}");
        }
    }
}

#[test]
fn a_stalled_process_is_fenced_and_its_scatterings_stay_all_or_nothing() {
    for seed in 1..=3 {
        let stalled = 2;
        let w = run(Setup {
            crash: Some((stalled, 4_000 * US)),
            // Found silent after 10 beacon intervals (200 µs); it runs
            // again before the controller recovers (300 µs later).
            stall: Some(400 * US),
            dup: 0.01,
            reorder: 0.01,
            ..Setup::new(true, 0.01, 2_000, seed)
        });
        assert_eq!(w.crashed, Some(stalled), "seed {seed}: not fenced");
        assert!(
            w.fenced_drops > 0,
            "seed {seed}: it never spoke while fenced"
        );
        assert_all_or_nothing(&w, stalled, seed);
    }
}

#[test]
fn best_effort_goes_on_past_a_crashed_process() {
    for seed in 1..=3 {
        let crashed = 5;
        let w = run(Setup {
            crash: Some((crashed, 4_000 * US)),
            ..Setup::new(false, 0.01, 2_000, seed)
        });
        assert!(w.recovered, "seed {seed}: the silent link was not noticed");
        assert_eq!(ordering_violations(&w), 0, "seed {seed}");
        let got = delivered_set(&w);
        // Between correct processes: delivered or reported, never both.
        for m in w.sent.iter().filter(|m| m.1 != crashed && m.2 != crashed) {
            assert!(
                got.contains_key(m) != w.failed.contains(m),
                "seed {seed}: {m:?}"
            );
        }
        // Messages to the crashed process after the crash are reported.
        for m in w.sent.iter().filter(|m| m.2 == crashed && m.0 > 4_100 * US) {
            assert!(w.failed.contains(m), "seed {seed}: {m:?}");
        }
        for p in (0..8).filter(|&p| p != crashed) {
            assert_eq!(w.left[p as usize], 0, "seed {seed}: process {p}");
        }
    }
}

/// Beacons on the lane: capped over a window above the data path's delay,
/// they never overtake data (no drop, nothing late, everything delivered
/// as without the lane); with no window, data they overtook is dropped at
/// the hop or refused as late and reported (best effort) or sent again
/// (reliable), and the order holds either way.
#[test]
fn lane_beacons_capped_over_the_window_never_overtake_data() {
    for seed in 1..=3 {
        for reliable in [false, true] {
            for (window, overtakes) in [(10 * US, false), (0, true)] {
                let w = run(Setup {
                    lane: Some(window),
                    ..Setup::new(reliable, 0.0, 2_000, seed)
                });
                let what = format!("seed {seed}, reliable {reliable}, window {window}");
                assert!(w.lane_beacons > 0, "{what}");
                assert_eq!(ordering_violations(&w), 0, "{what}");
                let late: u64 = w.receivers.iter().map(|r| r.stats().late).sum();
                let dropped = w.backwards_drops + late;
                assert_eq!(dropped > 0, overtakes, "{what}: {dropped} dropped");
                let got = delivered_set(&w);
                assert!(got.values().all(|&n| n == 1), "{what}: delivered twice");
                for m in &w.sent {
                    let (d, f) = (got.contains_key(m), w.failed.contains(m));
                    assert!(d != f, "{what}: {m:?} delivered {d} failed {f}");
                    assert!(d || (!reliable && overtakes), "{what}: {m:?} not delivered");
                }
            }
        }
    }
}
