//! Ground truth: the tool's sojourn percentiles against M/M/1 theory.
//!
//! The synthetic server runs one worker (c = 1) with exponential service of
//! mean 500 µs; the client sends Poisson requests at ρ = 0.3, 0.5 and 0.7.
//! c = 1 because this runs on a 2-vCPU machine: a busy-spinning worker takes
//! one CPU for ρ of the time, and the client, the server's receiving thread
//! and the kernel's network work need the other; two spinning workers would
//! leave them nothing at ρ = 0.7. The overhead of the path (stacks, hand-off
//! to the worker, wake-ups) is measured first with zero service time and
//! subtracted (see `xlane_lancet::mmc` for the exact acceptance rule).
//!
//! About 45 s: 2 s of overhead run, then 5–15 s per load (the run grows
//! while the confidence intervals are wider than ±15 %); twice that when the
//! first attempt disagrees and a second one is made.

use xlane_lancet::mmc::{run_mmc, MmcConfig};
use xlane_lancet::CheckStatus;

#[test]
fn sojourn_percentiles_match_mm1_theory() {
    // One more attempt, with another seed, if the first disagrees: on a
    // shared 2-vCPU machine a burst of other work can starve the single
    // worker for long enough to skew one load's tail. Two disagreements in
    // a row fail the test.
    let mut cfg = MmcConfig::default();
    let mut rep = run_mmc(&cfg).expect("the M/M/1 check could not run");
    println!("{}", rep.render());
    if !rep.all_pass {
        println!("attempt 1 (seed {}) disagreed; measuring again", cfg.seed);
        cfg.seed += 1;
        rep = run_mmc(&cfg).expect("the M/M/1 check could not run");
        println!("{}", rep.render());
    }
    for run in &rep.runs {
        for name in ["rate", "responses"] {
            let ch = run
                .report
                .checks
                .iter()
                .find(|c| c.name == name)
                .expect("check present");
            assert_eq!(
                ch.status,
                CheckStatus::Pass,
                "seed {}: ρ = {}: {name} check failed: {}",
                cfg.seed,
                run.rho,
                ch.detail
            );
        }
        // Every latency came with kernel stamps on loopback.
        let k = &run.report.counts;
        assert_eq!(k.tx_user + k.rx_user, 0, "ρ = {}: {k:?}", run.rho);
    }
    assert!(
        rep.all_pass,
        "seed {}: measured sojourn percentiles disagree with M/M/1 theory (table above)",
        cfg.seed
    );
}
