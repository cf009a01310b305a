//! The admission controllers against a simulated server (seeded): `c`
//! workers, each request sent to a random worker's FIFO (SVEN's setting),
//! fixed, exponential or bimodal service of mean S̄ = 1 ms, an SLO at
//! p99 = 30·S̄, and an offered load stepped from 0.6 to 1.15 of capacity.
//! The controller sees, every period, the latencies of the requests that
//! finished in it, as the router sees FEEDBACKs, and the number of
//! requests outstanding at each arrival, as the router counts them.
//!
//! Checked, per distribution, at 1.15 × capacity once the step has
//! settled (3 s): without control p99 grows past 10 × SLO; with the cap,
//! p99 is within 1.1 × SLO in at least 95 % of the seconds and the goodput
//! is at least 90 % of the SLO-violating throughput (found by a sweep of
//! constant loads without control); the cap's worst second is below
//! AIAD's. At half load the cap drops nothing, or (bimodal) under 1 %.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use xlane_lane::sim::SimRng;
use xlane_rpc::admission::{Controller, ControllerKind, Histogram, Slo};

const MS: u64 = 1_000_000;
const MEAN: u64 = MS;
const WORKERS: usize = 8;
const PERIOD: u64 = 20 * MS;
const STEP_S: u64 = 10;
const LOADS: [f64; 3] = [0.6, 0.9, 1.15];

#[derive(Clone, Copy, Debug)]
enum Dist {
    Fixed,
    Exp,
    Bimodal,
}

fn service(d: Dist, rng: &mut SimRng) -> u64 {
    let mut u = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    match d {
        Dist::Fixed => MEAN,
        Dist::Exp => (-(1.0 - u()).ln() * MEAN as f64) as u64,
        // 90 % take D, 10 % take 10·D, mean 1.9·D = MEAN.
        Dist::Bimodal => {
            let d = MEAN as f64 / 1.9;
            if u() < 0.1 {
                (10.0 * d) as u64
            } else {
                d as u64
            }
        }
    }
}

/// Per second of the run: (offered load factor, p99 ns, goodput/s, drop share).
#[derive(Clone, Copy, Debug)]
struct Second {
    load: f64,
    p99: Option<u64>,
    goodput: u64,
    drop: f64,
}

/// Requests finished by `now` leave the queue (the outstanding count) and
/// their latencies go into `into`.
fn finish(done: &mut BinaryHeap<Reverse<(u64, u64)>>, now: u64, into: &mut [&mut Histogram]) {
    while let Some(&Reverse((f, lat))) = done.peek() {
        if f > now {
            break;
        }
        done.pop();
        for h in into.iter_mut() {
            h.record(lat);
        }
    }
}

fn simulate(
    d: Dist,
    kind: Option<ControllerKind>,
    slo: Slo,
    seed: u64,
    loads: &[f64],
    step_s: u64,
) -> Vec<Second> {
    let mut rng = SimRng::new(seed);
    let capacity = WORKERS as f64 * 1e9 / MEAN as f64;
    let mut ctl = kind.map(|k| Controller::new(k, slo));
    let mut free_at = [0u64; WORKERS];
    let mut done: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut window = Histogram::default();
    let mut second = Histogram::default();
    let (mut offered, mut dropped) = (0u64, 0u64);
    let mut out = Vec::new();
    let mut t = 0u64;
    let mut next_period = PERIOD;
    let end = step_s * loads.len() as u64 * 1_000_000_000;
    while t < end {
        let load = loads[((t / (step_s * 1_000_000_000)) as usize).min(loads.len() - 1)];
        let rate = load * capacity;
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        t += (-(1.0 - u).ln() / rate * 1e9) as u64;
        // Periods (and seconds) that ended before this arrival.
        while next_period <= t {
            finish(&mut done, next_period, &mut [&mut window, &mut second]);
            if let Some(c) = ctl.as_mut() {
                c.update(&window);
            }
            window.clear();
            if next_period % 1_000_000_000 == 0 {
                let good = (second.fraction_at_most(slo.latency_ns).unwrap_or(0.0)
                    * second.len() as f64)
                    .round() as u64;
                out.push(Second {
                    load: loads[((next_period - 1) / (step_s * 1_000_000_000)) as usize],
                    p99: second.quantile(0.99),
                    goodput: good,
                    drop: dropped as f64 / offered.max(1) as f64,
                });
                second.clear();
                (offered, dropped) = (0, 0);
            }
            next_period += PERIOD;
        }
        offered += 1;
        // Requests finished by now leave the outstanding count.
        finish(&mut done, t, &mut [&mut window, &mut second]);
        let coin = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        if let Some(c) = ctl.as_mut() {
            if !c.admits(done.len(), coin) {
                dropped += 1;
                continue;
            }
        }
        let w = rng.below(WORKERS as u64) as usize;
        let start = free_at[w].max(t);
        let finish = start + service(d, &mut rng);
        free_at[w] = finish;
        done.push(Reverse((finish, finish - t)));
    }
    out
}

const SLO: Slo = Slo {
    quantile: 0.99,
    latency_ns: 30 * MEAN,
};

/// Highest load (fraction of capacity, steps of 0.025) whose p99 over a
/// 5 s run without control stays within the SLO: the SLO-violating
/// throughput is just above it.
fn slo_load(d: Dist) -> f64 {
    let mut best = 0.0;
    for i in 20..=40 {
        let load = i as f64 * 0.025;
        let r = simulate(d, None, SLO, 7, &[load], 5);
        // A load passes when no second after the first violates.
        let worst = r[1..].iter().filter_map(|s| s.p99).max().unwrap_or(0);
        if worst <= SLO.latency_ns {
            best = load;
        } else {
            break;
        }
    }
    best
}

#[test]
fn the_cap_holds_the_slo_under_overload_and_aiad_overshoots_more() {
    let capacity = WORKERS as f64 * 1e9 / MEAN as f64;
    let settled = |r: &[Second]| r[(2 * STEP_S as usize + 3)..].to_vec();
    for d in [Dist::Fixed, Dist::Exp, Dist::Bimodal] {
        let none = simulate(d, None, SLO, 3, &LOADS, STEP_S);
        let aiad = simulate(d, Some(ControllerKind::AIAD), SLO, 3, &LOADS, STEP_S);
        let cap = simulate(d, Some(ControllerKind::CAP), SLO, 3, &LOADS, STEP_S);
        assert!(settled(&none).iter().all(|s| s.load > 1.1));
        // Without control the queue grows without bound.
        let last = none.last().unwrap().p99.unwrap_or(u64::MAX);
        assert!(last > 10 * SLO.latency_ns, "{d:?}: none ends at {last}");
        // With the cap: p99 within 1.1 × SLO in at least 95 % of the
        // settled seconds.
        let s = settled(&cap);
        let within = s
            .iter()
            .filter(|x| x.p99.is_some_and(|p| p * 10 <= SLO.latency_ns * 11))
            .count();
        assert!(
            within * 100 >= s.len() * 95,
            "{d:?}: {within} of {} seconds: {cap:?}",
            s.len()
        );
        // Goodput at least 90 % of the SLO-violating throughput.
        let good = s.iter().map(|x| x.goodput).sum::<u64>() as f64 / s.len() as f64;
        let violating = slo_load(d) * capacity;
        assert!(
            good >= 0.9 * violating,
            "{d:?}: goodput {good:.0}/s, SLO at {violating:.0}/s"
        );
        // Overshoot after the step: the cap's worst second below AIAD's.
        let worst = |r: &[Second]| settled(r).iter().filter_map(|x| x.p99).max().unwrap();
        assert!(
            worst(&cap) < worst(&aiad),
            "{d:?}: cap {} aiad {}",
            worst(&cap),
            worst(&aiad)
        );
        // AIAD bounds the latency too, if less tightly.
        assert!(worst(&aiad) < 10 * SLO.latency_ns, "{d:?}");
        assert!(settled(&aiad).iter().all(|x| x.drop > 0.0), "{d:?}");
    }
}

#[test]
fn the_cap_drops_little_at_half_load() {
    // At half load p99 is within the SLO; the cap still reacts to passing
    // excursions of its estimate above 0.7 · SLO (bimodal service has
    // them), so it may turn a few requests away, never many.
    for (d, most) in [(Dist::Fixed, 0.0), (Dist::Exp, 0.0), (Dist::Bimodal, 0.01)] {
        let r = simulate(d, Some(ControllerKind::CAP), SLO, 3, &[0.5], 10);
        let share = r.iter().map(|s| s.drop).sum::<f64>() / r.len() as f64;
        assert!(share <= most, "{d:?}: {share:.4} dropped: {r:?}");
    }
}
