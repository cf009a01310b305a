//! One point of the bench: the processes, the hop, the coordinator and
//! the background started, the failures caused on schedule, the hop's
//! reports followed, and what the deliveries show.

use std::collections::HashMap;
use std::net::SocketAddrV4;
use std::sync::atomic::Ordering;
use std::time::Duration;

use xlane_pipe::udp::now_ns;
use xlane_testbed::probe::quantile;
use xlane_testbed::testbed::host_addr;
use xlane_testbed::Testbed;

use super::check::{atomicity, ordering_violations, resumed_after, Atomicity, Sent};
use super::rig::{
    self, BenchCoordinator, Proc, ProcOut, ProcSpec, Rec, Switchd, SwitchdSpec, DEAD, QUIET,
};
use super::roster::{Cause, Roster};
use super::{
    lane, Beacons, Condition, Failure, FailureOut, Mode, PipeBenchConfig, PipeBenchError, Point,
    PointOut, Suspicion,
};
use crate::interference::{Cores, FloorSet, Interference};
use crate::stats::signed_diff;

/// Brings a cut host's link back up when dropped, whatever happened.
struct Cuts<'a> {
    tb: &'a Testbed,
    hosts: Vec<usize>,
}

impl Cuts<'_> {
    fn set(&self, host: usize, up: bool) -> Result<(), String> {
        let port = self
            .tb
            .switch_port(host)
            .ok_or_else(|| format!("no switch port for host {host}"))?;
        let state = if up { "up" } else { "down" };
        xlane_testbed::exec::run(
            "ip",
            &["-n", self.tb.switch_netns(), "link", "set", port, state],
        )
        .map(|_| ())
        .map_err(|e| format!("link {port} {state}: {e}"))
    }
}

impl Drop for Cuts<'_> {
    fn drop(&mut self) {
        for &h in &self.hosts {
            let _ = self.set(h, true);
        }
    }
}

pub(super) fn run_point(
    cfg: &PipeBenchConfig,
    tb: &Testbed,
    cores: &Cores,
    p: &Point,
    grants: Option<&lane::LaneGrants>,
) -> Result<PointOut, PipeBenchError> {
    let err = PipeBenchError::Run;
    let n = p.procs;
    let proc_hosts = p.hop_host.unwrap_or(cfg.hosts);
    let host_of = |q: usize| q % proc_hosts;
    let (hop_netns, hop_addr) = match p.hop_host {
        Some(h) => (
            tb.hosts()[h].netns.as_str(),
            SocketAddrV4::new(host_addr(h), rig::SWITCH_PORT),
        ),
        None => (
            tb.switch_netns(),
            SocketAddrV4::new(rig::SWITCH_ADDR, rig::SWITCH_PORT),
        ),
    };
    let lane = match (p.beacons, grants) {
        (Beacons::Regular, _) => None,
        (_, Some(g)) => Some(g),
        (_, None) => return Err(err("a lane point without tunnels".into())),
    };
    let from_hop = p.beacons == Beacons::Lane;
    let addrs: Vec<SocketAddrV4> = (0..n)
        .map(|q| SocketAddrV4::new(host_addr(host_of(q)), rig::PROC_PORT + q as u16))
        .collect();
    let dscp = match p.condition {
        Condition::BackgroundExpress => tb.config().express_dscp,
        _ => 0,
    };
    let fifo = (cfg.fifo > 0).then_some(cfg.fifo);
    let reliable = p.mode == Mode::Reliable;
    let drain_ns = 300_000_000u64.max(40 * p.beacon_us * 1_000);
    let run_ns = (p.seconds * 1e9) as u64;
    // The processes first: they bind and beacon, so that the hop hears
    // every input from its start; they send once `start` is set.
    let start_at = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
    let delivered = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let ready = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let coordinator = reliable.then_some(rig::COORD_ADDR);
    let procs: Vec<Proc> = (0..n)
        .map(|q| {
            Proc::start(ProcSpec {
                id: q as u32,
                netns: tb.hosts()[host_of(q)].netns.clone(),
                addrs: addrs.clone(),
                // The lane phase: the first host's processes send, the
                // others only receive.
                rate: match p.hop_host {
                    Some(_) if host_of(q) != 0 => 0.0,
                    _ => p.rate,
                },
                fanout: cfg.fanout.min(n - 1),
                reliable,
                beacon_ns: p.beacon_us * 1_000,
                payload: cfg.payload,
                seed: cfg.seed,
                start_ns: start_at.clone(),
                delivered: delivered.clone(),
                ready: ready.clone(),
                fifo,
                dscp,
                // The lane phase: the receiving processes on the regular
                // cores, as the flows beside them (the testbed gives the
                // lane core a queue of its own on every interface, which
                // their packets would take from it).
                core: match p.hop_host {
                    Some(_) if host_of(q) != 0 => cores.regular.first().copied(),
                    _ => None,
                },
                coordinator,
                hop: hop_addr,
                lane: lane.map(|g| g.endpoint(q, from_hop)),
            })
        })
        .collect();
    let stop_all = |procs: Vec<Proc>| {
        for q in procs {
            q.join();
        }
    };
    // Every process bound and beaconing before the hop starts counting
    // its silence: a thread the machine was slow to start is not a
    // silent link.
    let waited = std::time::Instant::now();
    while ready.load(Ordering::SeqCst) < n {
        if waited.elapsed() > Duration::from_secs(10) {
            let up = ready.load(Ordering::SeqCst);
            stop_all(procs);
            return Err(err(format!("{up} of {n} processes started within 10 s")));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut hop = match Switchd::start(&SwitchdSpec {
        exe: &cfg.exe,
        netns: hop_netns,
        bind: hop_addr,
        lane: lane.map(|g| g.switchd(n, from_hop)),
        procs: &addrs,
        beacon_us: p.beacon_us,
        dead_after: cfg.dead_after,
        coordinator,
        fifo: fifo.map(|p| p + 1),
        dscp,
    }) {
        Ok(h) => h,
        Err(e) => {
            stop_all(procs);
            return Err(err(e));
        }
    };
    let bg = match p.condition {
        Condition::Idle => None,
        Condition::BackgroundQuietHosts => {
            let quiet: Vec<usize> = (1..proc_hosts).collect();
            match Interference::start_between(tb, cores, &quiet) {
                Ok(b) => Some(b),
                Err(e) => {
                    stop_all(procs);
                    return Err(e.into());
                }
            }
        }
        _ => match Interference::start_all_ports(tb, cores, true, false) {
            Ok(b) => Some(b),
            Err(e) => {
                stop_all(procs);
                return Err(e.into());
            }
        },
    };
    let longest = if p.until_messages.is_some() {
        3 * run_ns
    } else {
        run_ns
    };
    let probes = FloorSet::start(cores, longest + drain_ns + 1_000_000_000).ok();
    let hop_cpu0 = hop.cpu_ns();
    let start = now_ns() + 50_000_000;
    start_at.store(start, Ordering::SeqCst);
    let mut cuts = Cuts {
        tb,
        hosts: Vec::new(),
    };
    // The failure schedule and the hop's reports must not wait behind the
    // processes.
    let rt = rig::RealTime::raise(fifo.map(|p| p + 1));
    // Reliable: the recovery coordinator, one priority above the
    // processes, as the hop.
    let coord =
        reliable.then(|| BenchCoordinator::start(tb.switch_netns(), &addrs, fifo.map(|p| p + 1)));
    // Processes reported silent, the failure each went down in (if real),
    // and when reported.
    let mut recovering: HashMap<usize, (Option<usize>, u64)> = HashMap::new();
    // When the coordinator last finished each process's recovery: its
    // report can arrive before the hop's event is read here.
    let mut recovered_at: HashMap<usize, u64> = HashMap::new();
    let planned = match p.until_messages {
        Some(_) => start + 3 * run_ns,
        None => start + run_ns,
    };
    let mut roster = Roster::new(n, start, planned);
    let mut suspicions = Vec::new();
    let mut failures: Vec<FailureOut> = Vec::new();
    let mut next_failure = 0;
    let mut problem = None;
    loop {
        let now = now_ns();
        if now >= roster.end() + drain_ns {
            break;
        }
        let enough = p
            .until_messages
            .is_some_and(|m| delivered.load(Ordering::Relaxed) >= m);
        // The planned end, enough delivered, or nobody left to scatter to
        // (then the point ends early, and says why).
        if roster.poll_end(now, enough) {
            for q in &procs {
                let _ =
                    q.state
                        .compare_exchange(rig::RUN, QUIET, Ordering::SeqCst, Ordering::SeqCst);
            }
        }
        if let Some(&(at, f)) = p.failures.get(next_failure) {
            if now >= start + (at * 1e9) as u64 {
                next_failure += 1;
                let mut t = now_ns();
                match f {
                    Failure::Kill(q) => {
                        procs[q as usize].state.store(DEAD, Ordering::SeqCst);
                        roster.fail(q as usize, Cause::Killed, t);
                    }
                    Failure::Cut(h) => {
                        cuts.hosts.push(h);
                        if let Err(e) = cuts.set(h, false) {
                            problem = Some(e);
                            break;
                        }
                        // The link is down once `ip` returned.
                        t = now_ns();
                        for q in (0..n).filter(|&q| host_of(q) == h) {
                            roster.fail(q, Cause::Cut, t);
                        }
                    }
                }
                failures.push(FailureOut {
                    failure: f,
                    // t ≥ now ≥ start + at: read after the check above.
                    at_ns: t - start,
                    detected_ns: Vec::new(),
                    recovered_ns: None,
                    resumed_ns: None,
                });
            }
        }
        // Recoveries the coordinator finished.
        while let Some(Ok((q, at))) = coord.as_ref().map(|c| c.recovered.try_recv()) {
            recovered_at.insert(q as usize, at);
            if let Some((Some(w), _)) = recovering.remove(&(q as usize)) {
                failures[w].note_recovery(start, at);
            }
        }
        let Some((t, ev)) = hop.next_event(Duration::from_millis(1)) else {
            continue;
        };
        if ev["event"] != "link_silent" {
            continue;
        }
        let Some(addr) = ev["input"]
            .as_str()
            .and_then(|a| a.parse::<SocketAddrV4>().ok())
        else {
            continue;
        };
        let Some(q) = addrs.iter().position(|a| *a == addr) else {
            continue;
        };
        let real = roster.failed(q);
        suspicions.push(Suspicion {
            proc: q as u32,
            at_ns: signed_diff(t, start),
            real,
        });
        // The failure this process went down in.
        let which = failures.iter().rposition(|f| match f.failure {
            Failure::Kill(k) => k as usize == q,
            Failure::Cut(h) => host_of(q) == h,
        });
        if let (true, Some(w)) = (real, which) {
            let at = start + failures[w].at_ns;
            failures[w].detected_ns.push(t.saturating_sub(at));
        }
        if reliable {
            // Held and fenced at the hop; the coordinator recovers it. The
            // process stops too: cut off, it would never hear that it was
            // declared failed, and would retransmit into the dead link
            // until the end of the point.
            procs[q].state.store(DEAD, Ordering::SeqCst);
            roster.fence(q, t);
            let failure = which.filter(|_| real);
            // Recovered already (the coordinator was faster than this
            // event) after the failure it went down in.
            let done = failure.and_then(|w| {
                let at = *recovered_at.get(&q)?;
                (at > start + failures[w].at_ns).then_some((w, at))
            });
            match done {
                Some((w, at)) => failures[w].note_recovery(start, at),
                None => {
                    recovering.insert(q, (failure, t));
                }
            }
        } else if let (true, Some(w)) = (real, which) {
            // Best effort: the hop removed the link itself.
            let at = start + failures[w].at_ns;
            failures[w].recovered_ns = Some(t.saturating_sub(at));
        }
    }
    drop(rt);
    // A recovery the coordinator still had under way 5 s after the hop's
    // report never completed (one it finished while the report waited
    // here is done).
    let open = match coord.map(BenchCoordinator::stop) {
        Some(Ok((_, open))) => open,
        Some(Err(e)) => {
            problem.get_or_insert(e);
            Vec::new()
        }
        None => Vec::new(),
    };
    if let Some((q, _)) = recovering.iter().find(|(q, (_, t))| {
        open.contains(&(**q as u32)) && now_ns().saturating_sub(*t) > 5_000_000_000
    }) {
        problem.get_or_insert(format!("the recovery of process {q} never completed"));
    }
    let outs: Vec<ProcOut> = procs.into_iter().map(Proc::join).collect();
    drop(cuts);
    let hop_cpu = hop.cpu_ns().saturating_sub(hop_cpu0);
    let hop_end = hop.stop();
    let background_bps: u64 = bg.map_or(0, |b| b.stop().iter().sum());
    let floor = probes.map(|f| f.stop().0);
    if let Some(e) = problem {
        return Err(err(e));
    }
    if let Some(e) = outs.iter().find_map(|o| o.error.clone()) {
        return Err(err(e));
    }
    let mut o = analyze(p, &outs, &roster, failures);
    o.background_bps = background_bps;
    o.suspicions = suspicions;
    o.false_suspicions = o.suspicions.iter().filter(|s| !s.real).count() as u64;
    let secs = (roster.outcome().window.len_ns() + drain_ns) as f64 / 1e9;
    o.hop_cpu = hop_cpu as f64 / 1e9 / secs;
    o.procs_cpu = outs.iter().map(|x| x.cpu_ns).sum::<u64>() as f64 / 1e9 / secs;
    let hop_beacons = hop_end
        .as_ref()
        .and_then(|v| v["beacons"].as_u64())
        .unwrap_or(0);
    // Regular beacons; the lane's are counted below.
    let beacons = hop_beacons + outs.iter().map(|x| x.driver.beacons).sum::<u64>();
    // Lane frames: the processes' ports and the hop's.
    let hop_lane = hop_end.as_ref().map(|v| v["lane"].clone());
    let lane_count = |key: &str| {
        outs.iter()
            .filter_map(|x| x.lane)
            .map(|l| match key {
                "sent" => l.sent,
                "received" => l.received,
                "lost" => l.lost,
                "refused" => l.refused,
                _ => l.capped,
            })
            .sum::<u64>()
            + hop_lane.as_ref().and_then(|v| v[key].as_u64()).unwrap_or(0)
    };
    o.lane_sent = lane_count("sent");
    o.lane_received = lane_count("received");
    o.lane_lost = lane_count("lost");
    o.lane_refused = lane_count("refused");
    o.lane_capped = lane_count("capped");
    // 82 bytes a regular beacon on the wire, 110 a lane beacon frame.
    let lane_frames = outs
        .iter()
        .filter_map(|x| x.lane)
        .map(|l| l.sent)
        .sum::<u64>()
        + hop_lane
            .as_ref()
            .and_then(|v| v["sent"].as_u64())
            .unwrap_or(0);
    let bits = beacons * 82 * 8 + lane_frames * u64::from(xlane_pipe::lane::LANE_WIRE_BYTES) * 8;
    o.beacons_per_s = (beacons + lane_frames) as f64 / secs;
    o.beacon_bps = bits as f64 / secs;
    if let Some(f) = floor {
        o.floor_stolen = f
            .cores
            .iter()
            .map(|c| c.stolen_fraction)
            .fold(0.0, f64::max);
        o.floor_max_gap_ns = f.cores.iter().map(|c| c.max_gap_ns).max().unwrap_or(0);
    }
    Ok(o)
}

/// What the deliveries of a point show, once it stopped: a point that
/// ended before its start has an empty window, and says so.
fn analyze(
    p: &Point,
    outs: &[ProcOut],
    roster: &Roster,
    mut failures: Vec<FailureOut>,
) -> PointOut {
    let outcome = roster.outcome();
    let correct = roster.correct();
    let window = outcome.window;
    let (start, end) = (window.start(), window.end());
    let recs: Vec<&[Rec]> = outs.iter().map(|o| o.recs.as_slice()).collect();
    let ordering = recs.iter().map(|r| ordering_violations(r)).sum();
    let atom = if p.mode == Mode::Reliable {
        let senders: Vec<Sent> = outs
            .iter()
            .map(|o| Sent {
                id: o.id,
                sent: &o.sent,
                failed: &o.failed,
            })
            .collect();
        atomicity(&senders, &recs, &correct)
    } else {
        Atomicity::default()
    };
    let ok: Vec<&[Rec]> = recs
        .iter()
        .zip(&correct)
        .filter(|(_, c)| **c)
        .map(|(r, _)| *r)
        .collect();
    for f in failures.iter_mut() {
        f.resumed_ns = resumed_after(&ok, start + f.at_ns);
    }
    // Latencies of messages sent after a warm-up of a tenth of the point.
    let from = window.warmed_up();
    let measured = || {
        ok.iter()
            .flat_map(|r| r.iter())
            .filter(|d| d.ts >= from && d.ts < end)
    };
    let (mut un, mut de): (Vec<u64>, Vec<u64>) = measured()
        .map(|d| {
            (
                d.arrived.saturating_sub(d.ts),
                d.delivered.saturating_sub(d.ts),
            )
        })
        .unzip();
    let mut wait: Vec<u64> = measured()
        .map(|d| d.delivered.saturating_sub(d.arrived))
        .collect();
    un.sort_unstable();
    de.sort_unstable();
    wait.sort_unstable();
    let q = |v: &[u64], x| quantile(v, x).unwrap_or(0);
    let mut timeline = Vec::new();
    if p.timeline {
        let ms = (window.len_ns() / 1_000_000 + 1) as usize;
        timeline = vec![0u32; ms];
        for d in ok.iter().flat_map(|r| r.iter()) {
            if let Some(b) = d
                .delivered
                .checked_sub(start)
                .and_then(|t| timeline.get_mut((t / 1_000_000) as usize))
            {
                *b += 1;
            }
        }
    }
    PointOut {
        phase: p.phase,
        procs: p.procs,
        mode: p.mode,
        condition: p.condition,
        beacons: p.beacons,
        beacon_us: p.beacon_us,
        rate: p.rate,
        seconds: window.len_ns() as f64 / 1e9,
        scatterings: outs.iter().map(|o| o.sent.len() as u64).sum(),
        messages: recs.iter().map(|r| r.len() as u64).sum(),
        ordering_violations: ordering,
        atomicity_violations: atom.violations,
        lost: atom.lost,
        send_failed: outs.iter().map(|o| o.failed.len() as u64).sum(),
        late: outs.iter().map(|o| o.late).sum(),
        retransmits: outs.iter().map(|o| o.retransmits).sum(),
        unordered_p50_ns: q(&un, 0.5),
        unordered_p99_ns: q(&un, 0.99),
        delivered_p50_ns: q(&de, 0.5),
        delivered_p99_ns: q(&de, 0.99),
        overhead_p50_ns: q(&de, 0.5).saturating_sub(q(&un, 0.5)),
        wait_p50_ns: q(&wait, 0.5),
        wait_p99_ns: q(&wait, 0.99),
        lane_sent: 0,
        lane_received: 0,
        lane_lost: 0,
        lane_refused: 0,
        lane_capped: 0,
        hop_cpu: 0.0,
        procs_cpu: 0.0,
        beacons_per_s: 0.0,
        beacon_bps: 0.0,
        max_send_lag_ns: outs.iter().map(|o| o.max_send_lag_ns).max().unwrap_or(0),
        skipped: outs.iter().map(|o| o.skipped).sum(),
        suspicions: Vec::new(),
        false_suspicions: 0,
        failures,
        timeline_per_ms: timeline,
        floor_stolen: 0.0,
        floor_max_gap_ns: 0,
        background_bps: 0,
        ended_early: outcome.ended_early,
        ended_before_start: outcome.ended_before_start,
        removed: outcome.removed,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{render, PipeReport};
    use super::*;

    const MS: u64 = 1_000_000;

    fn point(mode: Mode) -> Point {
        Point {
            phase: "failures",
            procs: 3,
            mode,
            condition: Condition::Idle,
            rate: 100.0,
            seconds: 1.0,
            beacon_us: 1_000,
            failures: Vec::new(),
            timeline: true,
            until_messages: None,
            hop_host: None,
            beacons: Beacons::Regular,
        }
    }

    fn delivery(src: u32, ts: u64, arrived: u64, delivered: u64) -> Rec {
        Rec {
            src,
            ts,
            arrived,
            delivered,
        }
    }

    fn out(id: u32, recs: Vec<Rec>, sent: Vec<(u64, u64)>) -> ProcOut {
        ProcOut {
            id,
            recs,
            sent,
            ..ProcOut::default()
        }
    }

    fn report(points: Vec<PointOut>) -> PipeReport {
        PipeReport {
            config: super::super::PipeBenchConfig::default(),
            testbed: "t".into(),
            floor_hop_p50_ns: 0,
            messages: points.iter().map(|p| p.messages).sum(),
            ordering_violations: 0,
            atomicity_violations: 0,
            targets: super::super::report::targets(
                &super::super::PipeBenchConfig::default(),
                &points,
                0,
                0,
            ),
            points,
            lane_testbed: None,
            lane_tunnels: Vec::new(),
            lane_upcalls: Vec::new(),
        }
    }

    /// Degenerate points: each is analysed and rendered without a panic,
    /// and what it measured is what it had.
    #[test]
    fn degenerate_points_are_analysed_and_reported() {
        let start = 1_000 * MS;
        let failure = |at_ns| FailureOut {
            failure: Failure::Kill(1),
            at_ns,
            detected_ns: Vec::new(),
            recovered_ns: None,
            resumed_ns: None,
        };
        // (name, mode, procs' outputs, fences before/after the start,
        // stop at, want messages, want early, want before start)
        type Case = (
            &'static str,
            Mode,
            Vec<ProcOut>,
            &'static [(usize, i64)],
            u64,
            (u64, bool, bool),
        );
        let sent = start + 200 * MS;
        let cases: Vec<Case> = vec![
            (
                "no deliveries",
                Mode::Reliable,
                vec![
                    out(0, vec![], vec![(sent, 0b110)]),
                    out(1, vec![], vec![]),
                    out(2, vec![], vec![]),
                ],
                &[],
                start + 1_000 * MS,
                (0, false, false),
            ),
            (
                "every process failed before the start",
                Mode::Reliable,
                vec![
                    out(0, vec![], vec![]),
                    out(1, vec![], vec![]),
                    out(2, vec![], vec![]),
                ],
                &[(0, -30), (1, -20), (2, -10)],
                start - 5 * MS,
                (0, true, true),
            ),
            (
                "every process but one failed, after the start",
                Mode::BestEffort,
                vec![
                    out(0, vec![delivery(1, sent, sent + MS, sent + 2 * MS)], vec![]),
                    out(1, vec![], vec![(sent, 0b001)]),
                    out(2, vec![], vec![]),
                ],
                &[(1, 300), (2, 300)],
                start + 301 * MS,
                (1, true, false),
            ),
            (
                // Stamps out of order with the arrival: the latencies
                // clamp at 0, nothing wraps.
                "arrival before the stamp",
                Mode::BestEffort,
                vec![
                    out(0, vec![delivery(1, sent, sent - MS, sent - 2 * MS)], vec![]),
                    out(1, vec![], vec![]),
                    out(2, vec![], vec![]),
                ],
                &[],
                start + 1_000 * MS,
                (1, false, false),
            ),
        ];
        let mut points = Vec::new();
        for (name, mode, outs, fences, stop, (messages, early, before)) in cases {
            let mut roster = Roster::new(3, start, start + 1_000 * MS);
            for &(q, at_ms) in fences {
                roster.fence(q, start.checked_add_signed(at_ms * MS as i64).unwrap());
            }
            roster.poll_end(stop, false);
            let o = analyze(&point(mode), &outs, &roster, vec![failure(100 * MS)]);
            assert_eq!(
                (o.messages, o.ended_early, o.ended_before_start),
                (messages, early, before),
                "{name}"
            );
            assert_eq!(
                (o.ordering_violations, o.atomicity_violations),
                (0, 0),
                "{name}"
            );
            // Nothing wrapped: no latency above the 2 ms any delivery took.
            assert!(
                o.unordered_p99_ns <= 2 * MS && o.delivered_p99_ns <= 2 * MS,
                "{name}: {o:?}"
            );
            assert!(!o.timeline_per_ms.is_empty(), "{name}");
            assert_eq!(o.early_end().is_some(), early || before, "{name}");
            if before {
                assert_eq!(o.seconds, 0.0, "{name}");
                assert_eq!(o.removed.len(), 3, "{name}");
            }
            points.push(o);
        }
        let r = report(points);
        let text = render(&r);
        assert!(
            text.contains("Points that stopped sending early:"),
            "{text}"
        );
        assert!(
            text.contains("failures, reliable, 3 processes: ended before it started: fewer than two correct processes were left (process 0 fenced after the hop reported its link silent 30.00ms before the start"),
            "{text}"
        );
        assert!(
            text.contains("failures, best-effort, 3 processes: ended early"),
            "{text}"
        );
        let dir =
            std::env::temp_dir().join(format!("xlane-pipe-degenerate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = super::super::plot(&r, &dir).expect("plots of degenerate points");
        assert!(!files.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
        // No point at all.
        let empty = report(Vec::new());
        assert!(render(&empty).contains("0 messages"));
    }
}
